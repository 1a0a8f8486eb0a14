"""Plotly figures for comparing runs, shared by the dashboard and the HTML report.

Every builder takes tidy frames from the analysis modules plus the runs table, and names runs by
their `label` column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

# Up to this many runs, a curve chart draws a named line per run; more share one trace, named on hover.
CURVES_NAMED = 40


def _labels(runs: pd.DataFrame) -> pd.Series:
    return runs.set_index("run_id")["label"].astype("string")


def _with_labels(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    labels = _labels(runs)
    run_ids = frame["run_id"].astype(str)
    return frame.assign(label=run_ids.map(labels).fillna(run_ids).astype(str))


def _unit_range(values: pd.Series) -> list[float] | None:
    """[0, 1.05] for values that are all shares (most metrics), so equal scores don't get a
    stretched axis; None lets plotly choose for anything else."""
    finite = values.dropna()
    return [0.0, 1.05] if not finite.empty and finite.min() >= 0 and finite.max() <= 1 else None


def _mean_traces(frame: pd.DataFrame, kind: str = "dot") -> list[go.BaseTraceType]:
    """One trace per metric of a labelled metric_means frame: the mean per run with its CI as an
    error bar, and the scored/failed counts on hover."""
    traces: list[go.BaseTraceType] = []
    for metric, group in frame.groupby("metric", sort=False, observed=True):
        error = {
            "type": "data",
            "symmetric": False,
            "array": (group["ci_high"] - group["mean"]).to_numpy(),
            "arrayminus": (group["mean"] - group["ci_low"]).to_numpy(),
        }
        hover = "%{y}<br>" + str(metric) + " = %{x:.3f}<br>n = %{customdata[0]}, failed = %{customdata[1]}"
        common: dict[str, Any] = {
            "x": group["mean"],
            "y": group["label"],
            "name": str(metric),
            "error_x": error,
            "customdata": group[["n", "n_failed"]].to_numpy(),
            "hovertemplate": hover,
            "orientation": "h",
        }
        if kind == "bar":
            traces.append(go.Bar(**common))
        else:
            common.pop("orientation")
            traces.append(go.Scatter(mode="markers", marker={"size": 9}, **common))
    return traces


def _run_order(frame: pd.DataFrame) -> list[str]:
    """Run labels by their mean over the frame's metrics, best at the top."""
    return frame.groupby("label")["mean"].mean().sort_values().index.tolist()


def metric_bar_chart(means: pd.DataFrame, runs: pd.DataFrame, kind: str = "dot") -> go.Figure:
    """One row per run, one trace per metric: the mean with its CI as an error bar.

    `means` comes from means.metric_means; kind is "dot" or "bar".
    """
    frame = _with_labels(means, runs)
    order = _run_order(frame)
    figure = go.Figure(_mean_traces(frame, kind))
    figure.update_layout(
        barmode="group", xaxis_title="mean over questions (95% CI: cluster-robust t)" if not frame.empty else None,
        xaxis_range=_unit_range(pd.concat([frame["ci_low"], frame["ci_high"]])) if not frame.empty else None,
        yaxis={"categoryorder": "array", "categoryarray": order}, height=max(300, 28 * len(order) + 120),
        margin={"l": 10, "r": 10, "t": 40, "b": 40}, legend_title_text="metric",
    )
    return figure


def panels_chart(panels: list[tuple[str, pd.DataFrame]], runs: pd.DataFrame) -> go.Figure:
    """Panels side by side on one row per run, each a metric_means frame drawn as means with CI
    error bars: e.g. answer quality beside recall@k beside latency. Runs are ordered by the first
    panel; a panel of shares gets a 0-1 axis, any other (latency) its own scale."""
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.06,
                           subplot_titles=[title for title, _ in panels])
    order: list[str] = []
    for column, (_, means) in enumerate(panels, start=1):
        frame = _with_labels(means, runs)
        order = order or _run_order(frame)
        for trace in _mean_traces(frame):
            figure.add_trace(trace, row=1, col=column)
        if not frame.empty:
            figure.update_xaxes(range=_unit_range(pd.concat([frame["ci_low"], frame["ci_high"]])), row=1, col=column)
    labels = _with_labels(pd.concat([means for _, means in panels]), runs)["label"].unique().tolist()
    order += [label for label in sorted(labels) if label not in order]
    figure.update_yaxes(categoryorder="array", categoryarray=order)
    figure.update_layout(
        height=max(300, 28 * len(order) + 160),
        margin={"l": 10, "r": 10, "t": 60, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.15, "title": {"text": "metric", "side": "left"}},
    )
    return figure


def curve_chart(curves: pd.DataFrame, runs: pd.DataFrame, base_metric: str) -> go.Figure:
    """`base_metric`@k against k, one line per run (`curves` from means.curve)."""
    frame = _with_labels(curves, runs)
    figure = go.Figure()
    if frame["label"].nunique() <= CURVES_NAMED:
        for label, group in frame.groupby("label", sort=True):
            figure.add_trace(go.Scatter(x=group["k"], y=group["mean"], mode="lines+markers", name=str(label)))
    elif not frame.empty:
        # Every run's line in one trace, each broken off by a gap: a trace per run costs a
        # millisecond or more to build and to draw, and a legend of hundreds of names reads as none.
        ordered = frame.sort_values(["label", "k"], kind="stable")
        starts = np.flatnonzero(ordered["label"].ne(ordered["label"].shift()).to_numpy())[1:]
        gap = np.full(len(starts), np.nan)
        figure.add_trace(go.Scatter(
            x=np.insert(ordered["k"].to_numpy(dtype="float64"), starts, gap),
            y=np.insert(ordered["mean"].to_numpy(dtype="float64"), starts, gap),
            customdata=np.insert(ordered["label"].to_numpy(dtype=object), starts, ""),
            hovertemplate="%{customdata}<br>k = %{x}: %{y:.3f}<extra></extra>", mode="lines+markers",
            connectgaps=False, name=f"{frame['label'].nunique()} runs", line={"width": 1}, marker={"size": 4},
            opacity=0.6,
        ))
    figure.update_layout(title=f"{base_metric}@k", xaxis_title="k", yaxis_title=f"mean {base_metric}@k",
                         yaxis_range=_unit_range(frame["mean"]) if not frame.empty else None,
                         margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return figure


def latency_chart(latency: pd.DataFrame, runs: pd.DataFrame) -> go.Figure:
    """Stacked bars by stage: mean ms per question on the left; one-off build seconds (chunk,
    embed, index) on the right when there are any (`latency` from latency.latency_by_stage)."""
    frame = _with_labels(latency, runs)
    per_question = frame[frame["per_question"]]
    build = frame[~frame["per_question"]]
    columns = 2 if not build.empty else 1
    titles = ["ms per question", "build, s"][:columns]
    figure = make_subplots(rows=1, cols=columns, shared_yaxes=True, subplot_titles=titles,
                           column_widths=[0.65, 0.35][:columns], horizontal_spacing=0.08)
    for stage, group in per_question.groupby("stage", sort=False):
        figure.add_trace(go.Bar(x=group["seconds"] * 1000, y=group["label"], name=f"{stage}", orientation="h",
                                legendgroup="question"), row=1, col=1)
    for stage, group in build.groupby("stage", sort=False):
        figure.add_trace(go.Bar(x=group["seconds"], y=group["label"], name=f"{stage} (build)", orientation="h",
                                legendgroup="build"), row=1, col=2)
    figure.update_layout(barmode="stack", height=max(300, 28 * frame["label"].nunique() + 120),
                         margin={"l": 10, "r": 10, "t": 40, "b": 40}, legend_title_text="stage")
    return figure


def pareto_chart(frame: pd.DataFrame, runs: pd.DataFrame, quality: str = "quality", cost: str = "latency_ms",
                 quality_name: str | None = None) -> go.Figure:
    """Quality against cost per run, the Pareto-optimal runs highlighted and joined by a line.

    `frame` has run_id, the quality and cost columns and a boolean `pareto` column, as from
    latency.quality_vs_latency.
    """
    data = _with_labels(frame, runs)
    front = data[data["pareto"]].sort_values(cost)
    rest = data[~data["pareto"]]
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=rest[cost], y=rest[quality], mode="markers", name="dominated",
                                text=rest["label"], marker={"size": 9, "color": "lightgray"},
                                hovertemplate="%{text}<br>%{y:.3f} at %{x:.1f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=front[cost], y=front[quality], mode="lines+markers", name="Pareto front",
                                text=front["label"], line={"shape": "hv"}, marker={"size": 11},
                                hovertemplate="%{text}<br>%{y:.3f} at %{x:.1f}<extra></extra>"))
    figure.update_layout(xaxis_title="latency per question (ms)" if cost == "latency_ms" else cost,
                         yaxis_title=quality_name or quality, margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return figure


def pair_names(effects: pd.DataFrame) -> pd.Series:
    """"rerank: off → llm" for each comparison row (a judge factor without its "judge." prefix);
    run pairs that read the same (one toggle over different other settings) are numbered #1, #2, ..."""
    keys = list(zip(effects["factor"], effects["level_a"], effects["level_b"],
                    effects["run_a"].fillna(""), effects["run_b"].fillna("")))
    distinct = list(dict.fromkeys(keys))
    names = pd.Series([f"{factor.removeprefix('judge.')}: {a} → {b}" for factor, a, b, _, _ in distinct])
    numbers = " #" + (names.groupby(names).cumcount() + 1).astype(str)
    names = names + numbers.where(names.duplicated(keep=False), "")
    lookup = dict(zip(distinct, names))
    return pd.Series([lookup[key] for key in keys], index=effects.index, dtype="string")


def forest_chart(effects: pd.DataFrame, runs: pd.DataFrame, strict: bool = False) -> go.Figure:
    """Forest plot of comparisons, one panel per metric, one row per comparison: the difference
    b - a with its 95% CI, a dotted line at no difference. `effects`: rows of the comparison
    engine (ragkit.analysis.comparison), pairs of runs or factor levels; ``strict``: draw the strict
    difference (failures at the failure value) with its own CI and p instead."""
    if strict:
        effects = effects.assign(**{name: effects[f"strict_{name}"] for name in ("diff", "ci_low", "ci_high",
                                                                                  "p", "p_adj")},
                                 n=effects["n_strict"])
    metrics = list(dict.fromkeys(effects["metric"]))
    labels = _labels(runs)
    data = effects.assign(pair=pair_names(effects), label_a=effects["run_a"].map(labels).fillna(effects["level_a"]),
                          label_b=effects["run_b"].map(labels).fillna(effects["level_b"]))
    pairs = list(dict.fromkeys(data["pair"]))
    figure = make_subplots(rows=1, cols=max(1, len(metrics)), shared_yaxes=True, horizontal_spacing=0.04,
                           subplot_titles=[f"Δ {metric}" for metric in metrics])
    for column, metric in enumerate(metrics, start=1):
        group = data[data["metric"] == metric]
        figure.add_trace(go.Scatter(
            x=group["diff"], y=group["pair"], mode="markers", marker={"size": 9}, name=str(metric),
            error_x={
                "type": "data",
                "symmetric": False,
                "array": (group["ci_high"] - group["diff"]).to_numpy(),
                "arrayminus": (group["diff"] - group["ci_low"]).to_numpy(),
            },
            customdata=group[["label_a", "label_b", "p", "p_adj", "n", "metric_compared"]].to_numpy(dtype=object),
            hovertemplate=("%{y}<br>a: %{customdata[0]}<br>b: %{customdata[1]}<br>Δ %{customdata[5]} = %{x:.3f}"
                           "<br>p = %{customdata[2]:.3g}, p (adj.) = %{customdata[3]:.3g}, n = %{customdata[4]}"
                           "<extra></extra>"),
        ), row=1, col=column)
        # Centred on no difference, so the side a CI falls on reads at a glance.
        reach = pd.concat([group["ci_low"], group["ci_high"], group["diff"]]).abs().max()
        if pd.notna(reach) and reach > 0:
            figure.update_xaxes(range=[-1.15 * reach, 1.15 * reach], row=1, col=column)
    figure.update_yaxes(categoryorder="array", categoryarray=pairs[::-1])
    figure.update_xaxes(title_text=("strict " if strict else "") + "b - a (95% CI)")
    # The dotted lines at no difference, one per panel, as shapes on its axes: add_vline per panel
    # took 0.1 s (it searches the figure for each panel's axes).
    suffixes = [str(column) if column > 1 else "" for column in range(1, max(1, len(metrics)) + 1)]
    figure.update_layout(showlegend=False, height=max(300, 30 * len(pairs) + 140),
                         margin={"l": 10, "r": 10, "t": 60, "b": 40},
                         shapes=[{"type": "line", "x0": 0, "x1": 0, "y0": 0, "y1": 1, "xref": f"x{suffix}",
                                  "yref": f"y{suffix} domain", "line": {"dash": "dot"}} for suffix in suffixes])
    return figure


def failure_class_chart(counts: pd.DataFrame, runs: pd.DataFrame) -> go.Figure:
    """Per run, a horizontal bar stacked by failure class (``failure_classes.class_counts``):
    each run's bar is its number of questions."""
    frame = _with_labels(counts, runs)
    figure = go.Figure()
    for column in [c for c in counts.columns if c != "run_id"]:
        figure.add_trace(go.Bar(x=frame[column], y=frame["label"], name=str(column), orientation="h"))
    figure.update_layout(barmode="stack", height=max(300, 28 * len(frame) + 120), xaxis_title="questions",
                         margin={"l": 10, "r": 10, "t": 40, "b": 40}, legend_title_text="class")
    return figure
