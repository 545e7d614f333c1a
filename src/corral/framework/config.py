"""The scheduler configuration (SPEC.md §1.2): Volcano's config file shape, validated when it loads.

Plugin and action arguments are frozen dataclasses (DESIGN.md convention 2). A field's metadata names
the key it is read from (Volcano keys such as ``binpack.weight`` are not Python names); ``prefix`` fields
collect every key under a prefix (``binpack.resources.<name>``). An unknown action, plugin, switch or
argument, or a value of the wrong type, is a :class:`ConfigError` naming the file, the path and the
allowed values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

import yaml

from corral.errors import ConfigError
from corral.framework.extension import FEATURE_SWITCHES, POINTS
from corral.manifests.fields import parse_duration

__all__ = ["arg", "NoArgs", "PluginConfig", "ActionConfig", "Config", "parse_config", "load_config_file",
           "SWITCHES", "Registry", "parse_args"]

SWITCHES = tuple(sorted({p.switch for p in POINTS if p.switch} | set(FEATURE_SWITCHES)))


def arg(key: str, default: Any, doc: str = "", *, kind: str | None = None, prefix: bool = False,
        choices: tuple[str, ...] = (), minimum: float | None = None) -> Any:
    """Declare an argument field read from ``key``. ``kind`` "duration" parses Go durations to seconds;
    ``minimum`` bounds numbers from below."""
    meta = {"key": key, "doc": doc, "kind": kind, "prefix": prefix, "choices": choices, "minimum": minimum}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class NoArgs:
    """A plugin or action without arguments."""


class Registry(Protocol):
    def plugin_class(self, name: str) -> type | None: ...
    def action_class(self, name: str) -> type | None: ...
    def plugin_names(self) -> list[str]: ...
    def action_names(self) -> list[str]: ...
    def canonical_action(self, name: str) -> str: ...


@dataclass(frozen=True)
class PluginConfig:
    name: str
    switches: Mapping[str, bool]
    args: Any

    def enabled(self, switch: str | None) -> bool:
        return switch is None or self.switches.get(switch, True)


@dataclass(frozen=True)
class ActionConfig:
    name: str
    args: Any


@dataclass(frozen=True)
class Config:
    actions: tuple[ActionConfig, ...]
    tiers: tuple[tuple[PluginConfig, ...], ...]
    source: str = "built-in default"
    simulation: Mapping[str, Any] = field(default_factory=dict)   # read by the simulator only

    def plugin(self, name: str) -> PluginConfig | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None


def _coerce(value: Any, f: dataclasses.Field, where: str, file: str) -> Any:
    out = _coerce_type(value, f, where, file)
    low = f.metadata.get("minimum")
    if low is not None and isinstance(out, (int, float)) and not isinstance(out, bool) and out < low:
        raise ConfigError(f"must be at least {float(low)}, got {value!r}", file=file, field=where)
    return out


def _coerce_type(value: Any, f: dataclasses.Field, where: str, file: str) -> Any:
    meta = f.metadata
    want = f.type if isinstance(f.type, type) else str(f.type)
    kind = meta.get("kind")
    if kind == "duration":
        try:
            return parse_duration(value)
        except Exception:
            raise ConfigError(f"expected a duration (e.g. 90s, 5m), got {value!r}", file=file, field=where) from None
    if want in (bool, "bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"expected true or false, got {value!r}", file=file, field=where)
    if want in (int, "int"):
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
            raise ConfigError(f"expected an integer, got {value!r}", file=file, field=where)
        return int(value)
    if want in (float, "float"):
        if isinstance(value, bool):
            raise ConfigError(f"expected a number, got {value!r}", file=file, field=where)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"expected a number, got {value!r}", file=file, field=where) from None
    if want in (str, "str"):
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"expected a string, got {value!r}", file=file, field=where)
        value = str(value)
        if meta.get("choices") and value not in meta["choices"]:
            raise ConfigError(f"unknown value {value!r} (allowed: {', '.join(meta['choices'])})",
                              file=file, field=where)
        return value
    return value


def parse_args(cls: type, raw: Any, where: str, file: str) -> Any:
    """Build the frozen ``cls`` from an ``arguments`` mapping, rejecting unknown keys and wrong types."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of arguments", file=file, field=where)
    fields = dataclasses.fields(cls)
    by_key = {f.metadata.get("key", f.name): f for f in fields if not f.metadata.get("prefix")}
    prefixes = [f for f in fields if f.metadata.get("prefix")]
    values: dict[str, Any] = {}
    collected: dict[str, dict] = {f.name: {} for f in prefixes}
    for key, value in raw.items():
        key = str(key)
        path = f"{where}.{key}"
        f = by_key.get(key)
        if f is not None:
            values[f.name] = _coerce(value, f, path, file)
            continue
        for pf in prefixes:
            pkey = pf.metadata["key"]
            if key.startswith(pkey):
                try:
                    collected[pf.name][key[len(pkey):]] = float(value)
                except (TypeError, ValueError):
                    raise ConfigError(f"expected a number, got {value!r}", file=file, field=path) from None
                break
        else:
            allowed = sorted(by_key) + [f.metadata["key"] + "<name>" for f in prefixes]
            raise ConfigError(f"unknown argument {key!r} (allowed: {', '.join(allowed) or 'none'})",
                              file=file, field=path)
    for name, d in collected.items():
        if d:
            values[name] = d
    return cls(**values)


def _plugin(raw: Any, path: str, file: str, registry: Registry) -> PluginConfig:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError("expected a plugin mapping with a name", file=file, field=path)
    name = raw["name"]
    cls = registry.plugin_class(name)
    if cls is None:
        raise ConfigError(f"unknown plugin {name!r} (allowed: {', '.join(registry.plugin_names())})",
                          file=file, field=f"{path}.name")
    switches: dict[str, bool] = {}
    args_raw = None
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "arguments":
            args_raw = value
            continue
        if key not in SWITCHES:
            raise ConfigError(f"unknown switch {key!r} for plugin {name} (allowed: arguments, "
                              f"{', '.join(SWITCHES)})", file=file, field=f"{path}.{key}")
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {value!r}", file=file, field=f"{path}.{key}")
        switches[key] = value
    args = parse_args(getattr(cls, "Args", NoArgs), args_raw, f"{path}.arguments", file)
    return PluginConfig(name, switches, args)


def parse_config(raw: Any, registry: Registry, file: str = "<config>") -> Config:
    """Validate a config mapping against the registry."""
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping with actions and tiers", file=file)
    unknown = sorted(set(raw) - {"actions", "tiers", "configurations", "metrics", "kind", "apiVersion",
                                 "simulation"})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} (allowed: actions, tiers, configurations)", file=file,
                          field=unknown[0])
    actions_raw = raw.get("actions")
    if not isinstance(actions_raw, str) or not actions_raw.strip():
        raise ConfigError("expected a comma-separated list of actions", file=file, field="actions")
    names = []
    for a in actions_raw.split(","):
        a = a.strip()
        if not a:
            continue
        canon = registry.canonical_action(a)
        if registry.action_class(canon) is None:
            raise ConfigError(f"unknown action {a!r} (allowed: {', '.join(registry.action_names())})",
                              file=file, field="actions")
        if canon in names:
            raise ConfigError(f"action {a!r} listed twice", file=file, field="actions")
        names.append(canon)
    confs: dict[str, Any] = {}
    for i, c in enumerate(raw.get("configurations") or []):
        path = f"configurations[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise ConfigError("expected {name, arguments}", file=file, field=path)
        canon = registry.canonical_action(c["name"])
        cls = registry.action_class(canon)
        if cls is None:
            raise ConfigError(f"unknown action {c['name']!r} (allowed: {', '.join(registry.action_names())})",
                              file=file, field=f"{path}.name")
        confs[canon] = parse_args(getattr(cls, "Args", NoArgs), c.get("arguments"), f"{path}.arguments", file)
    actions = tuple(ActionConfig(n, confs.get(n) or parse_args(getattr(registry.action_class(n), "Args", NoArgs),
                                                                None, "", file)) for n in names)
    tiers_raw = raw.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfigError("expected a list of tiers", file=file, field="tiers")
    tiers = []
    seen: set[str] = set()
    for ti, tier in enumerate(tiers_raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfigError("expected {plugins: [...]}", file=file, field=f"tiers[{ti}]")
        plugins = []
        for pi, p in enumerate(tier["plugins"]):
            pc = _plugin(p, f"tiers[{ti}].plugins[{pi}]", file, registry)
            if pc.name in seen:
                raise ConfigError(f"plugin {pc.name!r} configured twice", file=file,
                                  field=f"tiers[{ti}].plugins[{pi}].name")
            seen.add(pc.name)
            plugins.append(pc)
        tiers.append(tuple(plugins))
    sim = raw.get("simulation") or {}
    if not isinstance(sim, dict):
        raise ConfigError("expected a mapping (simulator settings)", file=file, field="simulation")
    config = Config(actions, tuple(tiers), file, sim)
    for a in actions:
        check = getattr(registry.action_class(a.name), "check_config", None)
        if check is not None:
            check(config, file)
    return config


def load_config_file(path: str | Path, registry: Registry) -> Config:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=str(p)) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"malformed YAML{at}: {getattr(exc, 'problem', exc)}", file=str(p)) from None
    return parse_config(raw, registry, str(p))
