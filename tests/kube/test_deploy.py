"""deploy/: the RBAC grants exactly the verbs ``corral run`` uses (checked against the requests the
scheduler makes to the in-process API server), the ConfigMap holds a valid configuration, and the
Deployment runs ``corral run`` with that ConfigMap."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from corral.framework.config import parse_config
from corral.framework.decisions import Decisions, NodeLock
from corral.registry import REGISTRY
from tests.kube.test_live import NOW, PREEMPT, gang_objects, preempt_objects, wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_VERB = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+)?/(?P<res>[^/?]+)"
    r"(?:/(?P<name>[^/?]+))?(?:/(?P<sub>[^/?]+))?"
)


def _rules() -> set[tuple[str, str, str]]:
    out = set()
    for doc in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()):
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            out.add((g, r, v))
    return out


def _used(requests: list[tuple[str, str]]) -> set[tuple[str, str, str]]:
    out = set()
    for method, full in requests:
        path = full.split("?", 1)[0]
        m = _PATH.match(path)
        assert m, path
        res = m["res"] + (f"/{m['sub']}" if m["sub"] else "")
        verb = _VERB[method]
        if method == "GET" and m["name"] is None:
            verb = "watch" if "watch=true" in full else "list"
        out.add((m["group"] or "", res, verb))
    return out


def test_rbac_grants_exactly_what_is_used(server, runner_factory) -> None:
    seen = server.requests
    server.add_all(preempt_objects() + gang_objects(count=9, gpu=8, nodes=0))
    server.fail("PATCH", r"/podgroups/[^/]+$", 409)
    server.fail("POST", r"/pods/small-0/binding$", 409)
    r = runner_factory(PREEMPT, now=NOW, leader_elect=True, lease_namespace="corral-system")
    r.start()
    assert r.cache.wait_synced(5) and wait_for(r.is_leader)
    r.cycle(NOW)
    cluster, _ = r.cache.build()
    r.applier.apply(Decisions(node_locks=[NodeLock("n1", "default/high", 1)]), cluster, NOW)
    assert wait_for(lambda: any(m == "PUT" for m, _ in seen))  # a lease renewal
    r.stop()
    used = _used(server.full_requests)
    rules = _rules()
    missing = {u for u in used if u not in rules}
    assert not missing, missing
    # every rule is a verb the scheduler uses (watch and list of every watched kind, writes seen above)
    unused = {x for x in rules if x not in used and x[2] not in ("watch",)}
    kai = {x for x in unused if x[0] == "scheduling.run.ai"}  # same calls as Volcano's kinds
    # Kubernetes' own PodGroups: the same calls as KAI's (tests/kube/test_native.py writes them)
    native = {x for x in unused if x[0] == "scheduling.k8s.io" and x[1].startswith("podgroups")}
    # DRA claims are written only for pods with claims (tests/kube/test_dra.py writes them)
    dra = {
        ("resource.k8s.io", "resourceclaims", "patch"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),
    }
    assert unused - kai - native - dra == set(), unused - kai - native - dra


def test_configmap_and_deployment() -> None:
    cm = yaml.safe_load((DEPLOY / "configmap.yaml").read_text())
    parse_config(yaml.safe_load(cm["data"]["scheduler.yaml"]), REGISTRY, "configmap")
    docs = list(yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()))
    dep = next(d for d in docs if d["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][0] == "run" and "--leader-elect" in c["args"]
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "corral-scheduler"
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert (DEPLOY / "Dockerfile").read_text().count("ENTRYPOINT") == 1


def test_kustomization_installs_everything_in_order() -> None:
    """``kubectl apply -k deploy/``: every manifest is a resource of the kustomization, and (when kubectl
    is at hand) the rendered stream puts the Namespace, ServiceAccount and ConfigMap before the
    Deployment that needs them; the Lease's Role and the pod's namespace (downward API) agree."""
    import shutil
    import subprocess

    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    manifests = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kust["resources"]) == manifests
    docs = [d for name in kust["resources"] for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert env["POD_NAMESPACE"] == "metadata.namespace"
    assert not any(a.startswith("--lease-namespace") for a in c["args"])
    role = next(d for d in docs if d["kind"] == "Role")
    assert {"leases"} == set(role["rules"][0]["resources"])
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(out.stdout) if d]
    for first in ("Namespace", "ServiceAccount", "ConfigMap", "Role", "RoleBinding"):
        assert kinds.index(first) < kinds.index("Deployment"), kinds


def test_the_image_installs_only_what_corral_run_imports(server, tmp_path) -> None:
    """The image leaves out the simulator's libraries; ``corral run`` works without them."""
    import subprocess
    import sys

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    install = dockerfile.split("RUN pip", 1)[1].split("FROM", 1)[0]
    assert '".[live]"' in install  # the extra tests/test_extras.py checks against the imports
    for heavy in ("pandas", "pyarrow", "matplotlib", "ortools", "rapidyaml"):
        assert heavy not in install
    server.add_all(preempt_objects())
    blocked = (
        "import sys\nfor m in ('pandas', 'pyarrow', 'matplotlib', 'ortools', 'ryml'): sys.modules[m] = None\n"
    )
    code = blocked + "from corral.cli import main; main()"
    args = ["run", "--server", server.url, "--dry-run", "--cycles", "1", "--metrics-bind-address", "-1"]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
