"""Annotation keys corral reads and writes on PodGroups and pods, where more than one layer uses them
(the simulator writes what the baseline plugins read)."""

from __future__ import annotations

__all__ = ["ATTAINED_SERVICE", "COMPLETED_RUNTIME", "EXPECTED_RUNTIME", "MODEL_CLASS"]

#: The run time a job is expected to take (a duration), on the PodGroup or its pods.
EXPECTED_RUNTIME = "corral.io/expected-runtime"
#: Work a job has done and kept (a duration): progress it resumes from after a restart.
COMPLETED_RUNTIME = "corral.io/completed-runtime"
#: GPU-seconds a job received in its past runs (every run counted, lost work included).
ATTAINED_SERVICE = "corral.io/attained-gpu-seconds"
#: The model class of a job (e.g. a Gavel job type or a Pollux application), on the PodGroup: the row of
#: the simulator's speed model (``simulation.speed``) the job's progress rate is read from.
MODEL_CLASS = "corral.io/model-class"
