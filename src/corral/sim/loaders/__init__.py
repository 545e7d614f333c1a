"""Loaders for the public traces beyond corral's own schema, Philly and Alibaba GPU-2023 (which live in
:mod:`corral.sim.workload`): the Parallel Workloads Archive's SWF, Gavel, Pollux, Tiresias, Alibaba's
2025 DLRM instances and Helios' ``cluster_log.csv``. Each returns a :class:`~corral.sim.workload.JobList`
with the promises of that module (sorted, re-based, plain units, one-line errors naming the row, what was
skipped counted). :mod:`corral.sim.formats` is the one registry that names them for ``--format``."""
