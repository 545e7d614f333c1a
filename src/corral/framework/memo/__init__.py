"""Cross-cycle memory: the job index, the skip memory, the kept order keys, and the
:class:`ClusterHistory` that holds them for a front end. Never imports the session."""

from corral.framework.memo.history import ClusterHistory

__all__ = ["ClusterHistory"]
