"""The trace-driven simulator: workloads, clusters, the event engine, metrics and reports."""

from corral.sim.clusters import ClusterSpec, build_cluster, check_workload, load_cluster
from corral.sim.engine import Engine, SimOptions, simulate
from corral.sim.jobspec import JobSpec, RoleSpec
from corral.sim.report import summarize, write_comparison, write_report
from corral.sim.result import SimResult
from corral.sim.workload import filter_jobs, load_trace, scale_arrivals

__all__ = ["ClusterSpec", "build_cluster", "check_workload", "load_cluster", "Engine", "SimOptions", "simulate",
           "JobSpec", "RoleSpec", "summarize", "write_comparison", "write_report", "SimResult", "filter_jobs",
           "load_trace", "scale_arrivals"]
