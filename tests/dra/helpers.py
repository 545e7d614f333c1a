"""Build DRA objects and inventories from manifest dicts for the unit tests."""

from __future__ import annotations

from typing import Any

from corral.dra.inventory import Inventory, build_inventory
from corral.dra.objects import Claim, parse_claim, parse_class, parse_slice, parse_template
from corral.manifests.fields import Obj

API = "resource.k8s.io/v1"


def obj(kind: str, raw: dict) -> Obj:
    return Obj(raw, "test.yaml", kind, kind in ("ResourceClaim", "ResourceClaimTemplate"))


def device(name: str, **attrs: Any) -> dict:
    out: dict[str, Any] = {"name": name}
    caps = {k[4:]: {"value": v} for k, v in attrs.items() if k.startswith("cap_")}
    plain = {k: v for k, v in attrs.items() if not k.startswith("cap_")}
    if plain:
        out["attributes"] = {
            k: {"bool": v} if isinstance(v, bool) else {"int": v} if isinstance(v, int) else {"string": v}
            for k, v in plain.items()
        }
    if caps:
        out["capacity"] = caps
    return out


def slice_(node: str, devices: list[dict], driver: str = "gpu.example.com", **pool: Any) -> Any:
    spec = {
        "driver": driver,
        "nodeName": node,
        "pool": {
            "name": pool.get("name", node),
            "generation": pool.get("generation", 1),
            "resourceSliceCount": pool.get("count", 1),
        },
        "devices": devices,
    }
    name = pool.get("slice", f"{node}-{driver}-{pool.get('generation', 1)}")
    return parse_slice(
        obj(
            "ResourceSlice",
            {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec},
        )
    )


def klass(name: str = "gpu", expr: str = "device.driver == 'gpu.example.com'", **spec: Any) -> Any:
    body = {"selectors": [{"cel": {"expression": expr}}] if expr else [], **spec}
    return parse_class(
        obj(
            "DeviceClass",
            {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": body},
        )
    )


def claim(name: str, requests: list[dict], constraints: list[dict] | None = None) -> Claim:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    raw = {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }
    return parse_claim(obj("ResourceClaim", raw))


def template(name: str, requests: list[dict]) -> Any:
    raw = {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }
    return parse_template(obj("ResourceClaimTemplate", raw))


def inventory(nodes: list[str], slices: list[Any], classes: list[Any], claims: list[Claim]) -> Inventory:
    return build_inventory(nodes, slices, classes, claims, {})
