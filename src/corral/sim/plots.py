"""The plots of a simulation report, drawn on matplotlib's Agg canvas and returned as PNG bytes.

Nothing here touches ``matplotlib.pyplot`` or the global backend: every figure is a
:class:`~matplotlib.figure.Figure` with its own Agg canvas, so drawing is safe in a library, in threads
and in tests. PNG files carry no ``Software`` metadata; with the same data and the same matplotlib
version the bytes are identical.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from corral.sim.result import SimResult

__all__ = [
    "CAPTIONS",
    "bar_plot",
    "cdf_plot",
    "comparison_plots",
    "data_uri",
    "report_plots",
    "share_plot",
    "step_plot",
]

Series = tuple[Sequence[float], Sequence[float]]

#: what each plot shows, under it on the report pages
CAPTIONS = {
    "utilisation.png": "GPUs in use over GPUs of live nodes, over the submission window (the drain after the "
    "last submission is left out; the summary gives both figures).",
    "demand.png": "GPUs asked for by pods that wait, beside GPUs in use: demand above the line is the backlog "
    "the policy left waiting.",
    "fragmentation.png": "Free GPUs on nodes that cannot host one waiting pod of the most common GPU size: "
    "capacity lost to fragmentation.",
    "pending.png": "Jobs waiting and jobs running over the submission window.",
    "interruptions.png": "Pods evicted (by the scheduler's preemption and reclaim, and by failed nodes) and gangs "
    "restarted since the start, over the whole run: a steep step is a burst of evictions.",
    "evictions.png": "Pods evicted since the start of the run, per configuration (whole run).",
    "restarts.png": "Gangs restarted since the start of the run, per configuration (whole run).",
    "shares.png": "Each queue's allocated share of the GPUs (solid) against the share it deserves (dashed).",
    "jct_cdf.png": "Fraction of completed jobs whose completion time (submit to end) is at most x; "
    "logarithmic time axis.",
    "wait_cdf.png": "Fraction of jobs whose wait (submit to first start) is at most x, jobs still waiting at the "
    "end counted with the wait they had by then; logarithmic time axis.",
    "wait_by_size.png": "Mean wait by job size in GPUs (jobs per size under each bucket; waiting jobs counted "
    "to the end of the run); a log axis when the bars span more than two decades.",
    "slowdown_by_size.png": "Mean bounded slowdown — completion time over run time, run times under 10 s "
    "counted as 10 s — by job size; 1 means no wait.",
}


def _time_unit(seconds: float) -> tuple[float, str]:
    """A divisor and a name that keep a time axis readable."""
    if seconds >= 3 * 3600:
        return 3600.0, "hours"
    if seconds >= 600:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _figure(width: float = 8.0, height: float = 4.0) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _png(fig: Figure, ax: Axes, empty: bool) -> bytes:
    if empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    with warnings.catch_warnings():
        # labels from input (queue names) may be too long for any layout: the plot is drawn as it
        # is, and matplotlib's notice about it is not the user's business
        warnings.filterwarnings("ignore", message="Tight layout not applied", category=UserWarning)
        fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


MAX_POINTS = 2000


def _extend(
    times: Sequence[float], values: Sequence[float], end: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted step samples, with the last value held until ``end``; a series of more than
    :data:`MAX_POINTS` samples is resampled to that many equal time buckets, each showing the
    time-weighted mean of the step function over the bucket (a plot cannot show more anyway, and
    drawing a million segments takes seconds)."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    if len(t) and end is not None and end > t[-1]:
        t, v = np.append(t, end), np.append(v, v[-1])
    if len(t) <= MAX_POINTS or t[-1] <= t[0]:
        return t, v
    # integral of the step function from t[0] to each sample, then to each bucket edge
    cumulative = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    edges = np.linspace(t[0], t[-1], MAX_POINTS + 1)
    at = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    integral = cumulative[at] + v[at] * (edges - t[at])
    means = np.diff(integral) / np.diff(edges)
    return edges, np.append(means, means[-1])


def step_plot(
    series: Mapping[str, Series],
    *,
    title: str,
    ylabel: str,
    end: float | Mapping[str, float] | None = None,
    ylim: tuple[float, float] | None = None,
    window: float | None = None,
) -> bytes:
    """One step line per entry of ``series`` (label -> (times in seconds, values)); each sample holds
    until the next, the last until ``end`` (one time, or one per label). A legend appears when there
    is more than one line. ``window``: the time axis stops there (the submission window), so the drain
    after the last submission does not squeeze the part of the run the workload loads."""
    fig, ax = _figure()
    ends = end if isinstance(end, Mapping) else dict.fromkeys(series, end)
    extended = {label: _extend(t, v, ends.get(label)) for label, (t, v) in series.items()}
    span = max((t[-1] for t, _ in extended.values() if len(t)), default=0.0)
    if window is not None and 0 < window < span:
        span = window
        ax.set_xlim(0, window / _time_unit(span)[0])
    scale, unit = _time_unit(span)
    drawn = [label for label, (t, _) in extended.items() if len(t)]
    for label in drawn:
        t, v = extended[label]
        ax.step(t / scale, v, where="post", label=label, linewidth=1.2)
    ax.set_title(title)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if len(extended) > 1 and drawn:
        ax.legend(fontsize="small")
    return _png(fig, ax, empty=not drawn)


def share_plot(
    queues: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    end: float | None = None,
    window: float | None = None,
) -> bytes:
    """Per queue, its allocated share (solid) and deserved share (dashed, same colour) over time;
    ``queues`` maps a queue name to (times, allocated shares, deserved shares)."""
    fig, ax = _figure(9.0, 4.5)
    cmap = matplotlib.colormaps["tab20" if len(queues) > 10 else "tab10"]
    colours = [cmap(i % cmap.N) for i in range(len(queues))]
    span = max((max(t) for t, _, _ in queues.values() if len(t)), default=0.0)
    span = max(span, end or 0.0)
    if window is not None and 0 < window < span:
        span = window
        ax.set_xlim(0, window / _time_unit(span)[0])
    scale, unit = _time_unit(span)
    for colour, (name, (times, allocated, deserved)) in zip(colours, queues.items()):
        t, a = _extend(times, allocated, end)
        _, d = _extend(times, deserved, end)
        if len(t):
            ax.step(t / scale, a, where="post", color=colour, linewidth=1.2, label=name)
            ax.step(t / scale, d, where="post", color=colour, linewidth=1.0, linestyle="--")
    ax.set_title("Queue shares: allocated (solid) vs deserved (dashed)")
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("share of cluster GPUs")
    if queues:
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig, ax, empty=not queues)


def cdf_plot(series: Mapping[str, Sequence[float]], *, title: str, xlabel: str) -> bytes:
    """The empirical CDF of each entry's values (seconds), on a symmetric-log time axis because job
    times span seconds to weeks."""
    fig, ax = _figure()
    cleaned = {k: np.sort(np.asarray(v, dtype=float)) for k, v in series.items()}
    top = max((v[-1] for v in cleaned.values() if len(v)), default=0.0)
    scale, unit = _time_unit(top)
    for label, values in cleaned.items():
        if len(values):
            y = np.arange(1, len(values) + 1) / len(values)
            ax.step(
                np.concatenate(([values[0]], values)) / scale,
                np.concatenate(([0.0], y)),
                where="post",
                label=f"{label} (n={len(values)})",
                linewidth=1.2,
            )
    ax.set_xscale("symlog", linthresh=max(1.0 / scale, 1e-3))
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.set_xlabel(f"{xlabel} ({unit})")
    ax.set_ylabel("fraction of jobs")
    if any(len(v) for v in cleaned.values()):
        ax.legend(fontsize="small", loc="lower right")
    return _png(fig, ax, empty=not any(len(v) for v in cleaned.values()))


def bar_plot(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    ylabel: str,
    seconds: bool = False,
    counts: Sequence[int | None] | None = None,
) -> bytes:
    """Grouped bars: one group per entry of ``groups`` (x axis), one bar per entry of ``series`` (label
    -> one value per group; None draws no bar). ``seconds`` picks a readable time unit. Each bar carries
    its value; ``counts`` (jobs per group) go under the group's name; values spanning more than two
    decades get a log axis (a 10-second bar beside a 10-hour one would be invisible)."""
    fig, ax = _figure()
    values = {k: np.array([np.nan if x is None else float(x) for x in v]) for k, v in series.items()}
    top = max((float(np.nanmax(v)) for v in values.values() if np.isfinite(v).any()), default=0.0)
    scale, unit = _time_unit(top) if seconds else (1.0, "")
    width = 0.8 / max(len(values), 1)
    x = np.arange(len(groups))
    for i, (label, v) in enumerate(values.items()):
        bars = ax.bar(x + (i - (len(values) - 1) / 2) * width, v / scale, width, label=label)
        texts = ["" if not np.isfinite(b) else f"{b / scale:.3g}" for b in v]
        ax.bar_label(bars, labels=texts, fontsize=7, padding=1)
    positive = [float(b) for v in values.values() for b in v if np.isfinite(b) and b > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
        ylabel += ", log scale"
    names = list(groups)
    if counts is not None:
        names = [f"{g}\n{c:,} jobs" if c is not None else g for g, c in zip(names, counts)]
    ax.set_xticks(x, names)
    ax.margins(y=0.12)
    ax.set_title(title)
    ax.set_xlabel("job size (GPUs)")
    ax.set_ylabel(f"{ylabel} ({unit})" if unit else ylabel)
    drawn = any(np.isfinite(v).any() for v in values.values())
    if len(values) > 1 and drawn:
        ax.legend(fontsize="small")
    return _png(fig, ax, empty=not drawn)


def _size_bars(groups: Mapping[str, Sequence[Mapping]]) -> dict[str, bytes]:
    """Mean wait and mean bounded slowdown by job size, one bar per run."""
    order = list(dict.fromkeys(g["group"] for rows in groups.values() for g in rows if g["by"] == "size"))

    def column(key: str) -> dict[str, list]:
        index = {(n, g["group"]): g[key] for n, rows in groups.items() for g in rows if g["by"] == "size"}
        return {n: [index.get((n, grp)) for grp in order] for n in groups}

    jobs = {g["group"]: g["jobs"] for rows in groups.values() for g in rows if g["by"] == "size"}
    counts = [jobs.get(grp) for grp in order]
    return {
        "wait_by_size.png": bar_plot(
            order,
            column("wait_mean"),
            title="Mean wait by job size",
            ylabel="wait",
            seconds=True,
            counts=counts,
        ),
        "slowdown_by_size.png": bar_plot(
            order,
            column("bounded_slowdown_mean"),
            title="Mean bounded slowdown by job size",
            ylabel="bounded slowdown",
            counts=counts,
        ),
    }


def _cluster(result: SimResult, name: str) -> Series:
    return [s.time for s in result.cluster], [getattr(s, name) for s in result.cluster]


def data_uri(png: bytes) -> str:
    """A ``data:`` URI that embeds the PNG in an HTML page with no external file."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _utilisation(result: SimResult) -> Series:
    return [s.time for s in result.cluster], [s.utilisation for s in result.cluster]


def _values(result: SimResult, name: str) -> list[float]:
    return [getattr(j, name) for j in result.jobs if getattr(j, name) is not None]


def _waits(result: SimResult, end: float | None) -> list[float]:
    """Every wait, a job still waiting at ``end`` counting until then (censored)."""
    from corral.sim.breakdown import waits

    if end is None:
        return _values(result, "wait")
    return waits(result.jobs, end)


def _shares(result: SimResult) -> dict[str, tuple[list, list, list]]:
    """Per queue, its sample times, allocated shares and deserved shares, in time order."""
    queues: dict[str, tuple[list, list, list]] = {}
    for sample in sorted(result.queues, key=lambda s: (s.queue, s.time)):
        t, a, d = queues.setdefault(sample.queue, ([], [], []))
        t.append(sample.time)
        a.append(sample.allocated_share)
        d.append(sample.deserved_share)
    return queues


def report_plots(
    result: SimResult, end: float | None = None, groups: Sequence[Mapping] = (), window: float | None = None
) -> dict[str, bytes]:
    """The plots of one run, file name -> PNG: utilisation, GPU demand beside GPUs in use, fragmented
    GPUs and pending jobs over time, per-queue allocated vs deserved share, the CDFs of JCT and wait, and
    (given the :mod:`~corral.sim.breakdown` rows ``groups``) mean wait and slowdown by job size. Plots
    over time stop at ``window`` (the submission window) when given."""
    pending = {
        "pending": ([s.time for s in result.cluster], [s.pending_jobs for s in result.cluster]),
        "running": ([s.time for s in result.cluster], [s.running_jobs for s in result.cluster]),
    }
    return {
        "utilisation.png": step_plot(
            {"": _utilisation(result)},
            title="GPU utilisation",
            ylabel="GPUs in use / GPUs",
            end=end,
            ylim=(0, 1.05),
            window=window,
        ),
        "demand.png": step_plot(
            {
                "GPUs in use": _cluster(result, "gpu_used"),
                "GPUs asked for by waiting pods": _cluster(result, "pending_gpus"),
            },
            title="GPU demand waiting beside GPUs in use",
            ylabel="GPUs",
            end=end,
            window=window,
        ),
        "fragmentation.png": step_plot(
            {"": _cluster(result, "fragmented_gpus")},
            title="Free GPUs too few for a waiting pod of the most common size",
            ylabel="GPUs",
            end=end,
            window=window,
        ),
        "pending.png": step_plot(
            pending, title="Jobs pending and running", ylabel="jobs", end=end, window=window
        ),
        "shares.png": share_plot(_shares(result), end, window),
        "interruptions.png": step_plot(
            {"pods evicted": _cluster(result, "evictions"), "gang restarts": _cluster(result, "restarts")},
            title="Evictions and restarts so far",
            ylabel="count",
            end=end,
        ),
        "jct_cdf.png": cdf_plot(
            {"JCT": _values(result, "jct")}, title="Job completion time (CDF)", xlabel="submit to end"
        ),
        "wait_cdf.png": cdf_plot(
            {"wait": _waits(result, end)}, title="Wait (CDF)", xlabel="submit to first start"
        ),
        **_size_bars({"": groups}),
    }


def comparison_plots(
    results: Mapping[str, SimResult],
    ends: Mapping[str, float] | None = None,
    groups: Mapping[str, Sequence[Mapping]] | None = None,
    window: float | None = None,
) -> dict[str, bytes]:
    """Overlaid plots of several runs, one line per config: utilisation, waiting GPU demand and
    fragmented GPUs over time, JCT and wait CDFs; and bars side by side of wait and slowdown by job size
    (from each run's :mod:`~corral.sim.breakdown` rows, ``groups``). Each run's series hold until its own
    end (``ends``)."""
    util = {name: _utilisation(r) for name, r in results.items()}
    util_png = step_plot(
        util,
        title="GPU utilisation",
        ylabel="GPUs in use / GPUs",
        end=ends or None,
        ylim=(0, 1.05),
        window=window,
    )
    return {
        "utilisation.png": util_png,
        "demand.png": step_plot(
            {n: _cluster(r, "pending_gpus") for n, r in results.items()},
            title="GPUs asked for by waiting pods",
            ylabel="GPUs",
            end=ends or None,
            window=window,
        ),
        "fragmentation.png": step_plot(
            {n: _cluster(r, "fragmented_gpus") for n, r in results.items()},
            title="Free GPUs too few for a waiting pod of the most common size",
            ylabel="GPUs",
            end=ends or None,
            window=window,
        ),
        "evictions.png": step_plot(
            {n: _cluster(r, "evictions") for n, r in results.items()},
            title="Pods evicted so far",
            ylabel="pods",
            end=ends or None,
        ),
        "restarts.png": step_plot(
            {n: _cluster(r, "restarts") for n, r in results.items()},
            title="Gangs restarted so far",
            ylabel="gangs",
            end=ends or None,
        ),
        "jct_cdf.png": cdf_plot(
            {n: _values(r, "jct") for n, r in results.items()},
            title="Job completion time (CDF)",
            xlabel="submit to end",
        ),
        "wait_cdf.png": cdf_plot(
            {n: _waits(r, (ends or {}).get(n)) for n, r in results.items()},
            title="Wait (CDF)",
            xlabel="submit to first start",
        ),
        **_size_bars(groups or {}),
    }
