"""Compare: metric means with 95% CIs, curves over k, latency, Pareto front, single-factor pairs,
LLM calls and tokens, and each judge's share of invalid replies.

The selection (experiment, runs, metrics, curve) lives in st.query_params: the URL is shareable.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.selection import pick_results
from ragkit import analysis, charts

st.title("Compare runs")

experiment, results, run_ids = pick_results()
scores = results.scores[results.scores["run_id"].isin(run_ids)]
stages = results.stages[results.stages["run_id"].isin(run_ids)]
runs = results.runs[results.runs["run_id"].isin(run_ids)]
metrics = analysis.available_metrics(scores)
if not metrics:
    st.info("These runs have no scores yet.")
    st.stop()

headline = [m for m in ("recall@5", "recall@10", "ndcg@10", "mrr", "span_recall@5", "span_mrr") if m in metrics]
chosen = st.multiselect("Metrics", metrics, default=state.query_list("metrics", metrics, headline or metrics[:1]),
                        key=f"metrics.{experiment}")
bases = sorted({m.split("@", 1)[0] for m in metrics if "@" in m})
base = st.selectbox("Curve over k", bases, index=state.query_choice("curve", bases, "recall"),
                    key=f"curve.{experiment}")
state.set_query(metrics=chosen, curve=base)

if chosen:
    means = state.metric_means(experiment, chosen, run_ids)
    figure = charts.metric_bar_chart(means, runs)
    figure.update_layout(title=" · ".join(chosen) + " (95% CI)")
    st.plotly_chart(figure, key="metric_chart")

# Full width: with a realistic grid (a dozen runs or more) side-by-side charts get unreadable.
if base:
    st.plotly_chart(charts.curve_chart(analysis.curve(scores, base), runs, base), key="curve_chart")
st.plotly_chart(charts.latency_chart(analysis.latency_by_stage(stages), runs).update_layout(
    title="Latency by stage"), key="latency_chart")

quality = chosen[0] if chosen else metrics[0]
frame = analysis.quality_vs_latency(scores, stages, quality)
st.plotly_chart(charts.pareto_chart(frame, runs, quality_name=quality).update_layout(
    title=f"{quality} vs latency: Pareto front"), key="pareto_chart")

st.subheader("Single-factor pairs")
effects = state.factor_effects(experiment, quality, run_ids)
if effects.empty:
    st.caption("No two selected runs differ in exactly one factor.")
else:
    labels = dict(zip(runs["run_id"], runs["label"]))
    st.dataframe(
        effects.assign(run_a=effects["run_a"].map(labels), run_b=effects["run_b"].map(labels)),
        hide_index=True, key="pairs_table",
    )
    st.caption(f"mean_diff = {quality}(b) - {quality}(a) over the questions both runs scored, "
               "95% paired bootstrap CI; wins/ties/losses count questions where b beat, tied or lost to a.")

st.subheader("Runs x metrics")
st.dataframe(analysis.metric_table(scores, runs, chosen or None), hide_index=True, key="runs_table")

usage = state.llm_usage(experiment, run_ids)
replies = state.judge_replies(experiment, run_ids)
if not usage.empty or not replies.empty:
    st.subheader("LLM usage")
if not usage.empty:
    labels = dict(zip(runs["run_id"], runs["label"]))
    st.dataframe(usage.assign(run_id=usage["run_id"].map(labels)).rename(columns={"run_id": "run"}),
                 hide_index=True, key="llm_usage_table")
    st.caption("llm_calls: replies the run used (cached ones too); backend_calls: calls actually sent this time.")
if not replies.empty:
    st.dataframe(replies, hide_index=True, key="judge_replies_table",
                 column_config={"invalid_share": st.column_config.NumberColumn(format="percent"),
                                "fell_back_share": st.column_config.NumberColumn(format="percent")})
    st.caption("Per judge over the selected runs. invalid_share: replies that could not be parsed (never scored); "
               "fell_back_share: decisions where the judge used its off behaviour instead.")
