"""deploy/monitoring/: the Grafana dashboard loads as JSON and every PromQL expression in it (panels and
template variables) names only metrics ``corral run`` exports, with labels those metrics carry; the
ServiceMonitor reaches the scheduler's pods through deploy/service.yaml."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from corral.kube.metrics import Metrics
from tests.kube.test_live import NOW
from tests.kube.test_queue_metrics import CAPACITY, queue_objects

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MONITORING = DEPLOY / "monitoring"
DASHBOARD = MONITORING / "corral-dashboard.json"

_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\{[^}]*\}|\[[^\]]*\]|\d+(?:\.\d+)?(?:e[+-]?\d+|(?:ms|[smhdwy])+)?|[A-Za-z_:][\w:]*|\S'
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = {"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}
#: aggregation operators, which may be followed by ``by (...)`` before their parentheses
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values"}
_AGGREGATIONS |= {"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """The metric selectors of a PromQL expression: (metric name, label names its matchers use)."""
    tokens = _TOKEN.findall(expr)
    out: list[tuple[str, set[str]]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if re.fullmatch(r"[A-Za-z_:][\w:]*", tok):
            if tok in _GROUPING and nxt == "(":  # label names in parentheses, not metrics
                i = tokens.index(")", i)
            elif nxt == "(" or tok.lower() in _KEYWORDS or tok in _AGGREGATIONS | _GROUPING:
                pass  # a function or an aggregation
            else:
                labels = set(_MATCHER.findall(nxt)) if nxt.startswith("{") else set()
                out.append((tok, labels))
        i += 1
    return out


def test_selector_parsing() -> None:
    got = selectors(
        'histogram_quantile(0.9, sum by (le, queue_name) (rate(a_bucket{queue_name=~"$q"}[5m]))) '
        '/ on (x) group_left b * 100 + max(c{d="e", f!="g"}) offset 5m'
    )
    assert got == [("a_bucket", {"queue_name"}), ("b", set()), ("c", {"d", "f"})]


def exported_names(metrics: Metrics) -> set[str]:
    """Every sample name the exporter registers (a counter's ``_total``, a histogram's ``_bucket``,
    ``_sum`` and ``_count``), samples or not."""
    names: set[str] = set()
    for fam in metrics.registry.collect():
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
        }.get(fam.type, ("",))
        names |= {fam.name + s for s in suffixes}
    return names


def exprs(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query template variable."""
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert m, query
            out.append((f"${var['name']}", m.group(1)))
    return out


def test_the_dashboard_uses_only_exported_metrics(server, runner_factory) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["panels"]
    # the labels each metric carries, from a scrape after a cycle that fills the per-queue series
    server.add_all(queue_objects())
    r = runner_factory(CAPACITY, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    assert r.cycle(NOW) is not None
    labels: dict[str, set[str]] = defaultdict(set)
    for fam in text_string_to_metric_families(r.metrics.render().decode()):
        for s in fam.samples:
            labels[s.name] |= set(s.labels)
    names = exported_names(r.metrics)
    used = set()
    for where, expr in exprs(dashboard):
        found = selectors(expr)
        assert found, f"{where}: no metric in {expr!r}"
        for name, matchers in found:
            assert name in names, f"{where}: {name} is not exported by corral ({expr})"
            if name in labels:
                assert matchers <= labels[name] | {"le"}, (
                    f"{where}: {name} has no label {matchers - labels[name]}"
                )
            used.add(name)
    # the per-queue metrics of the issue are all on it
    for name in (
        "corral_queue_allocated",
        "corral_queue_deserved",
        "corral_queue_share",
        "corral_queue_overused",
        "corral_queue_pending_requests",
        "corral_queue_unschedulable_podgroups",
        "corral_queue_unschedulable_pods",
        "corral_binds_total",
        "corral_evictions_total",
        "corral_pod_scheduling_duration_seconds_bucket",
        "corral_cycle_seconds_bucket",
    ):
        assert name in used, name


def test_a_misnamed_metric_is_caught() -> None:
    """The check above fails on a dashboard naming a metric corral does not export."""
    names = exported_names(Metrics())
    assert [n for n, _ in selectors('sum(rate(volcano_queue_share{queue_name="a"}[5m]))') if n not in names]
    assert not [n for n, _ in selectors("max(corral_queue_share)") if n not in names]


def test_the_servicemonitor_reaches_the_scheduler() -> None:
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    service = yaml.safe_load((DEPLOY / "service.yaml").read_text())
    deployment = next(
        d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d["kind"] == "Deployment"
    )
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    container_ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert container_ports[ports[endpoint["port"]]["targetPort"]] == 10251
    assert "--metrics-bind-address=0.0.0.0:10251" in pod["spec"]["containers"][0]["args"]
    kust = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert kust["namespace"] == yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["namespace"]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    out = subprocess.run([kubectl, "kustomize", str(MONITORING)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    docs = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    assert set(docs) == {"ServiceMonitor", "ConfigMap"}
    cm = docs["ConfigMap"]
    assert cm["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert json.loads(cm["data"]["corral-dashboard.json"]) == json.loads(DASHBOARD.read_text())
