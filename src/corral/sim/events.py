"""Event priorities of the simulator (ties at one instant run in this order) and shared constants."""

from corral.model import TaskStatus

__all__ = ["COMPLETE", "CYCLE", "EVICT", "MAX_QUEUE_INSTANTS", "NODE", "RELEASE", "SAMPLE", "START", "SUBMIT"]

# event priorities at one instant (see corral.sim.engine's docstring)
COMPLETE, RELEASE, NODE, START, EVICT, SUBMIT, CYCLE, SAMPLE = range(8)
#: Task states that hold GPUs for the metrics.
_HOLDING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})
#: At most this many instants of queue samples are kept (see ``EngineMetrics._sample_queues``).
MAX_QUEUE_INSTANTS = 1000
