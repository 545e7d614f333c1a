"""``corral run``: the live Kubernetes scheduler (docs/kubernetes.md).

- :mod:`~corral.kube.api`: requests and watches through the official ``kubernetes`` client's transport;
- :mod:`~corral.kube.cache`: list + watch into the snapshot loader's model (one code path);
- :mod:`~corral.kube.apply`: decisions to Binding / Eviction / status patches / labels / Events;
- :mod:`~corral.kube.leader`: leader election on a Lease;
- :mod:`~corral.kube.runner`: the cycle loop; :mod:`~corral.kube.command`: the CLI command;
- :mod:`~corral.kube.metrics`, :mod:`~corral.kube.logs`: /metrics, /healthz, structured logs.
"""
