"""Plotly figures for comparing runs, shared by the dashboard and the HTML report.

Every builder takes tidy frames from ragkit.analysis plus the runs table, and names runs by
their `label` column.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots


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


def metric_bar_chart(means: pd.DataFrame, runs: pd.DataFrame, kind: str = "dot") -> go.Figure:
    """One row per run, one trace per metric: the mean with its CI as an error bar.

    `means` comes from analysis.metric_means; kind is "dot" or "bar".
    """
    frame = _with_labels(means, runs)
    order = frame.groupby("label")["mean"].mean().sort_values().index.tolist()
    figure = go.Figure()
    for metric, group in frame.groupby("metric", sort=False, observed=True):
        error = dict(type="data", symmetric=False, array=(group["ci_high"] - group["mean"]).to_numpy(),
                     arrayminus=(group["mean"] - group["ci_low"]).to_numpy())
        hover = "%{y}<br>" + str(metric) + " = %{x:.3f}<br>n = %{customdata[0]}, failed = %{customdata[1]}"
        common = dict(x=group["mean"], y=group["label"], name=str(metric), error_x=error,
                      customdata=group[["n", "n_failed"]].to_numpy(), hovertemplate=hover, orientation="h")
        if kind == "bar":
            figure.add_trace(go.Bar(**common))
        else:
            common.pop("orientation")
            figure.add_trace(go.Scatter(mode="markers", marker=dict(size=9), **common))
    figure.update_layout(
        barmode="group", xaxis_title="mean over questions (95% bootstrap CI)" if not frame.empty else None,
        xaxis_range=_unit_range(pd.concat([frame["ci_low"], frame["ci_high"]])) if not frame.empty else None,
        yaxis=dict(categoryorder="array", categoryarray=order), height=max(300, 28 * len(order) + 120),
        margin=dict(l=10, r=10, t=40, b=40), legend_title_text="metric",
    )
    return figure


def curve_chart(curves: pd.DataFrame, runs: pd.DataFrame, base_metric: str) -> go.Figure:
    """`base_metric`@k against k, one line per run (`curves` from analysis.curve)."""
    frame = _with_labels(curves, runs)
    figure = go.Figure()
    for label, group in frame.groupby("label", sort=True):
        figure.add_trace(go.Scatter(x=group["k"], y=group["mean"], mode="lines+markers", name=str(label)))
    figure.update_layout(title=f"{base_metric}@k", xaxis_title="k", yaxis_title=f"mean {base_metric}@k",
                         yaxis_range=_unit_range(frame["mean"]) if not frame.empty else None,
                         margin=dict(l=10, r=10, t=40, b=40))
    return figure


def latency_chart(latency: pd.DataFrame, runs: pd.DataFrame) -> go.Figure:
    """Stacked bars by stage: mean ms per question on the left; one-off build seconds (chunk,
    embed, index) on the right when there are any (`latency` from analysis.latency_by_stage)."""
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
                         margin=dict(l=10, r=10, t=40, b=40), legend_title_text="stage")
    return figure


def pareto_chart(frame: pd.DataFrame, runs: pd.DataFrame, quality: str = "quality", cost: str = "latency_ms",
                 quality_name: str | None = None) -> go.Figure:
    """Quality against cost per run, the Pareto-optimal runs highlighted and joined by a line.

    `frame` has run_id, the quality and cost columns and a boolean `pareto` column, as from
    analysis.quality_vs_latency.
    """
    data = _with_labels(frame, runs)
    front = data[data["pareto"]].sort_values(cost)
    rest = data[~data["pareto"]]
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=rest[cost], y=rest[quality], mode="markers", name="dominated",
                                text=rest["label"], marker=dict(size=9, color="lightgray"),
                                hovertemplate="%{text}<br>%{y:.3f} at %{x:.1f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=front[cost], y=front[quality], mode="lines+markers", name="Pareto front",
                                text=front["label"], line=dict(shape="hv"), marker=dict(size=11),
                                hovertemplate="%{text}<br>%{y:.3f} at %{x:.1f}<extra></extra>"))
    figure.update_layout(xaxis_title="latency per question (ms)" if cost == "latency_ms" else cost,
                         yaxis_title=quality_name or quality, margin=dict(l=10, r=10, t=40, b=40))
    return figure


def factor_effect_chart(effects: pd.DataFrame, metric: str) -> go.Figure:
    """Mean paired difference (b - a) with its CI per single-factor pair, for one metric
    (`effects` from analysis.factor_effects)."""
    data = effects[effects["metric"] == metric]
    names = (data["factor"] + ": " + data["value_a"] + " → " + data["value_b"]).tolist()
    figure = go.Figure(go.Scatter(
        x=data["mean_diff"], y=list(range(len(names))), mode="markers", marker=dict(size=9),
        error_x=dict(type="data", symmetric=False, array=(data["ci_high"] - data["mean_diff"]).to_numpy(),
                     arrayminus=(data["mean_diff"] - data["ci_low"]).to_numpy()),
        text=names, customdata=data[["latency_ms_diff"]].to_numpy(),
        hovertemplate="%{text}<br>Δ = %{x:.3f}<br>Δ latency = %{customdata[0]:.1f} ms<extra></extra>",
    ))
    figure.add_vline(x=0, line_dash="dot")
    figure.update_layout(xaxis_title=f"Δ {metric} (b - a, 95% paired bootstrap CI)",
                         yaxis=dict(tickvals=list(range(len(names))), ticktext=names),
                         height=max(300, 26 * len(names) + 120), margin=dict(l=10, r=10, t=40, b=40))
    return figure
