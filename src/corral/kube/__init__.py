"""``corral run``: the live Kubernetes scheduler (docs/kubernetes.md).

- :mod:`~corral.kube.api`: requests and watches through the official ``kubernetes`` client's transport;
- :mod:`~corral.kube.cache`: the stores and the scheduler's assumptions, assembled by the snapshot
  loader's model (one code path); :mod:`~corral.kube.informer`: list + watch into them;
  :mod:`~corral.kube.patches`: the merge patches assumptions are made of;
- :mod:`~corral.kube.apply`: decisions to Binding / Eviction / status patches / labels / Events;
  :mod:`~corral.kube.dryrun`: decisions assumed in the cache instead (``--dry-run``), the other
  :class:`~corral.framework.cycle.DecisionSink`;
  :mod:`~corral.kube.partial`: gangs left partly bound, completed or released in the next cycle;
- :mod:`~corral.kube.leader`: leader election on a Lease;
- :mod:`~corral.kube.runner`: the cycle loop; the command is :mod:`corral.commands.run`;
- :mod:`~corral.kube.metrics`, :mod:`~corral.kube.logs`: /metrics, /healthz, structured logs.
"""
