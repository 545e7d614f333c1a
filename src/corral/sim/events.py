"""Event kinds of the simulator, which are also their priorities (events at one instant run in this
order: see :mod:`corral.sim.engine`), and the constants the engine and its metrics share."""

from corral.model import TaskStatus

__all__ = [
    "COMPLETE",
    "CYCLE",
    "EVICT",
    "HOLDING",
    "MAX_QUEUE_INSTANTS",
    "NODE",
    "RELEASE",
    "SAMPLE",
    "START",
    "SUBMIT",
]

# event priorities at one instant (see corral.sim.engine's docstring)
COMPLETE, RELEASE, NODE, START, EVICT, SUBMIT, CYCLE, SAMPLE = range(8)
#: Task states that hold GPUs for the metrics.
HOLDING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})
#: At most this many instants of queue samples are kept (see ``RunMetrics.sample_queues``).
MAX_QUEUE_INSTANTS = 1000
