"""The scheduler configuration (SPEC.md §1.2): Volcano's config file shape, validated when it loads.

Plugin and action arguments are frozen dataclasses (DESIGN.md convention 2). A field's metadata names
the key it is read from (Volcano keys such as ``binpack.weight`` are not Python names); ``prefix`` fields
collect every key under a prefix (``binpack.resources.<name>``). An unknown action, plugin, switch or
argument, or a value of the wrong type, is a :class:`ConfigError` naming the file, the path and the
allowed values.

Volcano's configurations load unchanged (:mod:`corral.framework.volcano` holds the tables): the
scheduler ConfigMap is unwrapped; a switch is read in Volcano's spelling (``enabledOverused``) or
corral's (``enableOverused``); action arguments Volcano documents whose behaviour is always so in corral
are accepted and type-checked; a Volcano plugin or action corral does not implement is refused with a
message saying so and what to do.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from corral.errors import ConfigError
from corral.framework.extension import FEATURE_SWITCHES, POINTS
from corral.framework.volcano import (
    FIXED_ACTION_ARGS,
    INERT_SWITCHES,
    SWITCH_ALIASES,
    canonical_switch,
    refused_action_message,
    refused_plugin_message,
)
from corral.model.clock import parse_duration

__all__ = [
    "SWITCHES",
    "ActionConfig",
    "Config",
    "NoArgs",
    "PluginConfig",
    "Registry",
    "arg",
    "load_config_file",
    "parse_args",
    "parse_config",
]

SWITCHES = tuple(sorted({p.switch for p in POINTS if p.switch} | set(FEATURE_SWITCHES) | set(INERT_SWITCHES)))
#: Every spelling accepted: corral's uniform ``enableXxx`` and Volcano's own (``enabledOverused`` ...).
SWITCH_SPELLINGS = tuple(sorted(set(SWITCHES) | set(SWITCH_ALIASES)))


def arg(
    key: str,
    default: Any,
    doc: str = "",
    *,
    kind: str | None = None,
    prefix: bool = False,
    choices: tuple[str, ...] = (),
    minimum: float | None = None,
) -> Any:
    """Declare an argument field read from ``key``. ``kind`` "duration" parses Go durations to seconds;
    ``minimum`` bounds numbers from below."""
    meta = {"key": key, "doc": doc, "kind": kind, "prefix": prefix, "choices": choices, "minimum": minimum}
    if isinstance(default, (dict, list)):
        return field(default_factory=functools.partial(type(default), default), metadata=meta)
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


#: Volcano's default overcommit-factor (enqueue's and the overcommit plugin's).
DEFAULT_OVERCOMMIT = 1.2


@dataclass(frozen=True)
class Config:
    actions: tuple[ActionConfig, ...]
    tiers: tuple[tuple[PluginConfig, ...], ...]
    source: str = "built-in default"
    simulation: Mapping[str, Any] = field(default_factory=dict)  # read by the simulator only
    forecast: Mapping[str, Any] = field(default_factory=dict)  # expected starts (sim/forecast.py)

    def overcommit_factor(self) -> float:
        """The ``overcommit-factor`` the ``enqueue`` action was given, else Volcano's default 1.2."""
        for a in self.actions:
            factor = getattr(a.args, "overcommit_factor", None)
            if a.name == "enqueue" and factor is not None:
                return float(factor)
        return DEFAULT_OVERCOMMIT

    def plugin(self, name: str) -> PluginConfig | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None


# Every numeric argument is range-checked at load: no scheduler weight, factor or count is meaningful
# beyond this, and a bound keeps budgets (capacity x factor) finite in float64.
_MAX_NUMBER = 1e12


def _coerce(value: Any, f: dataclasses.Field[Any], where: str, file: str) -> Any:
    out = _coerce_type(value, f.type, f.metadata, where, file)
    low = f.metadata.get("minimum")
    if low is not None and isinstance(out, (int, float)) and not isinstance(out, bool) and out < low:
        raise ConfigError(f"must be at least {float(low)}, got {value!r}", file=file, field=where)
    return out


def _coerce_type(value: Any, declared: Any, meta: Mapping[str, Any], where: str, file: str) -> Any:
    """``value`` as the ``declared`` type (a type or its name, as dataclass fields carry it)."""
    want = declared if isinstance(declared, type) else str(declared)
    kind = meta.get("kind")
    if kind == "duration":
        try:
            return parse_duration(value)
        except Exception:
            raise ConfigError(
                f"expected a duration (e.g. 90s, 5m), got {value!r}", file=file, field=where
            ) from None
    if want in (bool, "bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"expected true or false, got {value!r}", file=file, field=where)
    if want in (int, "int"):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or (isinstance(value, str) and (not value.lstrip("-").isdigit() or len(value) > 20))
            or not abs(int(value)) <= _MAX_NUMBER
        ):
            raise ConfigError(
                f"expected an integer of magnitude at most {_MAX_NUMBER:g}, got {str(value)[:40]!r}",
                file=file,
                field=where,
            )
        return int(value)
    if want in (float, "float"):
        if isinstance(value, bool):
            raise ConfigError(f"expected a number, got {value!r}", file=file, field=where)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"expected a number, got {value!r}", file=file, field=where) from None
        if not abs(number) <= _MAX_NUMBER:  # NaN, inf and overflowing budgets stop here
            raise ConfigError(
                f"expected a finite number of magnitude at most {_MAX_NUMBER:g}, got {value!r}",
                file=file,
                field=where,
            )
        return number
    if want in (str, "str"):
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"expected a string, got {value!r}", file=file, field=where)
        value = str(value)
        if meta.get("choices") and value not in meta["choices"]:
            raise ConfigError(
                f"unknown value {value!r} (allowed: {', '.join(meta['choices'])})", file=file, field=where
            )
        return value
    return value


def _drop_fixed(
    raw: dict[Any, Any], fixed: Mapping[str, tuple[type, str]], where: str, file: str
) -> dict[Any, Any]:
    """``raw`` without the Volcano arguments whose behaviour is always so in corral, once their type is
    checked (:data:`corral.framework.volcano.FIXED_ACTION_ARGS`)."""
    out = {}
    for key, value in raw.items():
        spec = fixed.get(str(key))
        if spec is None:
            out[key] = value
            continue
        _coerce_type(value, spec[0], {}, f"{where}.{key}", file)
    return out


def parse_args(
    cls: type, raw: Any, where: str, file: str, fixed: Mapping[str, tuple[type, str]] | None = None
) -> Any:
    """Build the frozen ``cls`` from an ``arguments`` mapping, rejecting unknown keys and wrong types.
    ``fixed``: further keys accepted (type-checked) that change nothing."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of arguments", file=file, field=where)
    if getattr(cls, "ANY_ARGUMENTS", False):  # a plugin accepted with no effect: nothing to read
        return cls()
    if fixed:
        raw = _drop_fixed(raw, fixed, where, file)
    fields = dataclasses.fields(cls)
    by_key = {f.metadata.get("key", f.name): f for f in fields if not f.metadata.get("prefix")}
    prefixes = [f for f in fields if f.metadata.get("prefix")]
    values: dict[str, Any] = {}
    collected: dict[str, dict[Any, Any]] = {f.name: {} for f in prefixes}
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
                    collected[pf.name][key[len(pkey) :]] = float(value)
                    if not abs(collected[pf.name][key[len(pkey) :]]) <= _MAX_NUMBER:
                        raise ValueError(value)
                except (TypeError, ValueError, OverflowError):
                    raise ConfigError(f"expected a number, got {value!r}", file=file, field=path) from None
                break
        else:
            allowed = sorted(by_key) + sorted(fixed or ()) + [f.metadata["key"] + "<name>" for f in prefixes]
            raise ConfigError(
                f"unknown argument {key!r} (allowed: {', '.join(allowed) or 'none'})", file=file, field=path
            )
    for name, d in collected.items():
        if d:
            values[name] = d
    try:
        return cls(**values)
    except ConfigError as exc:  # an Args dataclass refusing a value it read: say where
        if exc.file is not None:
            raise
        inner = exc.field or ""
        path = f"{where}.{inner.removeprefix('arguments.')}" if inner else where
        raise ConfigError(exc.message, file=file, field=path) from None


def _plugin(raw: Any, path: str, file: str, registry: Registry) -> PluginConfig:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError("expected a plugin mapping with a name", file=file, field=path)
    name = raw["name"]
    cls = registry.plugin_class(name)
    if cls is None and refused_plugin_message(name):
        raise ConfigError(str(refused_plugin_message(name)), file=file, field=f"{path}.name")
    if cls is None:
        raise ConfigError(
            f"unknown plugin {name!r} (allowed: {', '.join(registry.plugin_names())})",
            file=file,
            field=f"{path}.name",
        )
    switches: dict[str, bool] = {}
    args_raw = None
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "arguments":
            args_raw = value
            continue
        if key not in SWITCH_SPELLINGS:
            raise ConfigError(
                f"unknown switch {key!r} for plugin {name} (allowed: arguments, "
                f"{', '.join(SWITCH_SPELLINGS)})",
                file=file,
                field=f"{path}.{key}",
            )
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {value!r}", file=file, field=f"{path}.{key}")
        canon = canonical_switch(key)
        if switches.get(canon, value) != value:
            raise ConfigError(
                f"{key} contradicts the same switch spelled {canon}", file=file, field=f"{path}.{key}"
            )
        switches[canon] = value
    args = parse_args(getattr(cls, "Args", NoArgs), args_raw, f"{path}.arguments", file)
    return PluginConfig(name, switches, args)


def unwrap_configmap(raw: Any, file: str) -> Any:
    """The scheduler config inside a ``kind: ConfigMap`` (as Volcano's installer ships it): the text
    under ``data["volcano-scheduler.conf"]``, or under the only key of ``data``; other mappings as they are."""
    if not isinstance(raw, dict) or raw.get("kind") != "ConfigMap":
        return raw
    data = raw.get("data")
    if not isinstance(data, dict) or not data:
        raise ConfigError("a ConfigMap needs data holding the scheduler config", file=file, field="data")
    key = "volcano-scheduler.conf" if "volcano-scheduler.conf" in data else None
    if key is None:
        if len(data) != 1:
            raise ConfigError(
                f"expected data key 'volcano-scheduler.conf' or a single key, got "
                f"{', '.join(sorted(map(str, data)))}",
                file=file,
                field="data",
            )
        key = next(iter(data))
    text = data[key]
    if not isinstance(text, str):
        raise ConfigError("expected the scheduler config as text", file=file, field=f"data.{key}")
    from corral.inputs import load_yaml  # bounded: the text is as untrusted as a file

    return load_yaml(text, f"{file} (data.{key})", ConfigError)


def _action_name(a: str, registry: Registry, file: str, where: str) -> str:
    canon = registry.canonical_action(a)
    if registry.action_class(canon) is None:
        raise ConfigError(
            refused_action_message(a)
            or f"unknown action {a!r} (allowed: {', '.join(registry.action_names())})",
            file=file,
            field=where,
        )
    return canon


def _tiers(tiers_raw: Any, registry: Registry, file: str) -> list[list[PluginConfig]]:
    """The tiers of plugins, each plugin once, plus the plugins others' arguments imply."""
    if not isinstance(tiers_raw, list):
        raise ConfigError("expected a list of tiers", file=file, field="tiers")
    tiers: list[list[PluginConfig]] = []
    seen: set[str] = set()
    for ti, tier in enumerate(tiers_raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfigError("expected {plugins: [...]}", file=file, field=f"tiers[{ti}]")
        plugins = []
        for pi, p in enumerate(tier["plugins"]):
            pc = _plugin(p, f"tiers[{ti}].plugins[{pi}]", file, registry)
            if pc.name in seen:
                raise ConfigError(
                    f"plugin {pc.name!r} configured twice", file=file, field=f"tiers[{ti}].plugins[{pi}].name"
                )
            seen.add(pc.name)
            plugins.append(pc)
        tiers.append(plugins)
    for plugins in tiers:  # e.g. predicate.GPUSharingEnable: the gpushare plugin
        for pc in list(plugins):
            for name in getattr(pc.args, "implied_plugins", tuple)():
                if name not in seen:
                    seen.add(name)
                    plugins.append(_plugin({"name": name}, f"{pc.name} (implied)", file, registry))
    return tiers


def parse_config(raw: Any, registry: Registry, file: str = "<config>") -> Config:
    """Validate a config mapping (or the ConfigMap that holds it) against the registry."""
    raw = unwrap_configmap(raw, file)
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping with actions and tiers", file=file)
    unknown = sorted(
        set(raw)
        - {"actions", "tiers", "configurations", "metrics", "kind", "apiVersion", "simulation", "forecast"}
    )
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: actions, tiers, configurations, simulation, forecast)",
            file=file,
            field=unknown[0],
        )
    names = _action_names(raw.get("actions"), registry, file)
    confs = _configurations(raw.get("configurations") or [], registry, file)
    actions = tuple(
        ActionConfig(
            n, confs.get(n) or parse_args(getattr(registry.action_class(n), "Args", NoArgs), None, "", file)
        )
        for n in names
    )
    tiers = _tiers(raw.get("tiers") or [], registry, file)
    sim = raw.get("simulation") or {}
    if not isinstance(sim, dict):
        raise ConfigError("expected a mapping (simulator settings)", file=file, field="simulation")
    forecast = raw.get("forecast") or {}
    if not isinstance(forecast, dict):
        raise ConfigError("expected a mapping (forecast settings)", file=file, field="forecast")
    config = Config(actions, tuple(tuple(t) for t in tiers), file, sim, forecast)
    for act in actions:
        check = getattr(registry.action_class(act.name), "check_config", None)
        if check is not None:
            check(config, file)
    return config


def _action_names(actions: Any, registry: Registry, file: str) -> list[str]:
    """The canonical names of ``actions`` (a comma-separated string), in order; empty, unknown or
    repeated actions are a ConfigError naming the field."""
    if not isinstance(actions, str) or not actions.strip():
        raise ConfigError("expected a comma-separated list of actions", file=file, field="actions")
    names: list[str] = []
    for a in actions.split(","):
        a = a.strip()
        if not a:
            continue
        canon = _action_name(a, registry, file, "actions")
        if canon in names:
            raise ConfigError(f"action {a!r} listed twice", file=file, field="actions")
        names.append(canon)
    return names


def _configurations(configurations: Any, registry: Registry, file: str) -> dict[str, Any]:
    """The arguments of ``configurations`` (a list of ``{name, arguments}``) by canonical action name,
    parsed against each action's ``Args`` (with the arguments Volcano fixes for it)."""
    if not isinstance(configurations, list):
        raise ConfigError(
            f"expected a list of {{name, arguments}}, got {type(configurations).__name__}",
            file=file,
            field="configurations",
        )
    confs: dict[str, Any] = {}
    for i, c in enumerate(configurations):
        path = f"configurations[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise ConfigError("expected {name, arguments}", file=file, field=path)
        canon = _action_name(c["name"], registry, file, f"{path}.name")
        confs[canon] = parse_args(
            getattr(registry.action_class(canon), "Args", NoArgs),
            c.get("arguments"),
            f"{path}.arguments",
            file,
            FIXED_ACTION_ARGS.get(canon),
        )
    return confs


def load_config_file(path: str | Path, registry: Registry) -> Config:
    from corral.inputs import load_yaml, read_text  # bounded: size, encoding, depth, aliases

    p = Path(path)
    raw = load_yaml(read_text(p, ConfigError), str(p), ConfigError)
    return parse_config(raw, registry, str(p))
