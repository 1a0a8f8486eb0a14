"""Compare: first what each factor does (each level against the factor's reference level, named in
the experiment or its first level, paired over the other factors; the strict difference leads
where questions failed), then metric means with 95% CIs, answer quality beside recall@k and latency,
curves over k, latency, Pareto front, judge on/off pairs, single-factor pairs (when there are
more than PAIRS_SHOWN_UNASKED, only when asked), LLM calls and tokens (pipeline and evaluation
apart), each judge's share of invalid replies, the recommendation (`ragkit best`) and why
questions fail (`ragkit failures`); a warning when the selected runs used different question sets,
corpora or evaluation models; judges against people when the folder has labels (agreement,
confusion, prediction-powered means; ragkit.labels.tables). Every number comes from ragkit.analysis
(through state.view, and its main figures through state.chart), the same engine as `ragkit report`.

Latency, the Pareto front and LLM usage count the pipeline's stages only; the evaluation's
`eval:*` LLM calls have their own table.

The selection (experiment, runs, metrics, curve, judge metrics) lives in st.query_params: the URL
is shareable.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.selection import name_unreadable, pick_results
from ragkit.analysis import charts, failures, judges, recommend
from ragkit.analysis.comparison import holm_family
from ragkit.analysis.notes import failure_note, holm_note, reference_line
from ragkit.analysis.report import CUT_RULE, factor_table, has_failures, pair_table
from ragkit.analysis.statistics import describe_method
from ragkit.analysis.views import PAIRS_SHOWN_UNASKED
from ragkit.metrics.names import CHARTED_GENERATION_METRICS, GENERATION_METRICS, HEADLINE_METRICS, better_direction

st.title("Compare runs")

experiment, results, run_ids = pick_results()
unreadable_notice = st.empty()  # filled at the end, once the page has read its tables
runs = results.runs[results.runs["run_id"].isin(run_ids)]
metrics = state.view("metric_names", experiment, run_ids)
if not metrics:
    st.info("These runs have no scores yet.")
    name_unreadable(experiment, unreadable_notice)
    st.stop()

labels = dict(zip(runs["run_id"], runs["label"]))
for difference in state.view("selection_differences", experiment, run_ids):
    st.warning(f"Hard to compare: {difference}. Comparisons use the questions both runs were asked "
               "(`ragkit compare` refuses such folders unless --allow-different).")
headline = [m for m in HEADLINE_METRICS if m in metrics]
chosen = st.multiselect("Metrics", metrics, default=state.query_list("metrics", metrics, headline or metrics[:1]),
                        key=f"metrics.{experiment}")
bases = sorted({m.split("@", 1)[0] for m in metrics if "@" in m})
base = st.selectbox("Curve over k", bases, index=state.query_choice("curve", bases, "recall"),
                    key=f"curve.{experiment}")
state.set_query(metrics=chosen, curve=base)
state.view("read_metrics", experiment, run_ids, chosen, base)

st.subheader("What each factor does")
if chosen:
    effects = state.view("factor_effects", experiment, run_ids, chosen)
    if effects.empty and state.view("single_factor_pairs", experiment, run_ids).empty:
        st.caption("No two selected runs differ in exactly one factor.")
    elif effects.empty:
        st.caption("No two levels of a factor could be compared on these metrics: a level lacks them (a cut-off "
                   "beyond its top_k, or a metric it does not score).")
    else:
        strict = has_failures(effects)  # then the strict difference leads, in the chart and the table
        st.plotly_chart(state.chart("forest_chart", "factor_effects", experiment, run_ids, chosen, strict=strict,
                                    title=("Strict: " if strict else "") + "level - reference (95% CI)"),
                        key="factor_chart")
        st.dataframe(factor_table(effects), hide_index=True, key="factor_table")
        references = state.view("factor_references", experiment, run_ids)
        st.caption(reference_line(references.itertuples()) + " Each level against its factor's reference, paired "
                   "over every matched setting of the other factors (settings). " + describe_method(results.unit)
                   + " " + holm_note(holm_family(effects)) + " strict Δ: over every question both sides were "
                   f"asked, {failure_note(chosen)}; signs DISAGREE: it and Δ over scored point opposite ways. A "
                   "judge that changes how many chunks reach the generator is compared at the common depth "
                   "('at ...').")

if chosen:
    st.plotly_chart(state.chart("metric_bar_chart", "means", experiment, run_ids, chosen,
                                title=" · ".join(chosen) + " (95% CI)"), key="metric_chart")
    st.caption(CUT_RULE)

generation = [m for m in GENERATION_METRICS if m in metrics]
if generation:
    st.subheader("Answer quality")
    charted = [m for m in CHARTED_GENERATION_METRICS if m in metrics] or generation
    recall = next((m for m in [*chosen, "recall@5", "recall@10", *reversed(metrics)]
                   if m.startswith("recall@") and m in metrics), None)
    quality_means = state.view("means", experiment, run_ids, charted + ([recall] if recall else []))
    panels = [("answer quality (95% CI)", quality_means[quality_means["metric"].isin(charted)])]
    if recall:
        panels.append((f"{recall} (95% CI)", quality_means[quality_means["metric"] == recall]))
    panels.append(("pipeline ms/question (95% CI)", state.view("latency_means", experiment, run_ids)))
    st.plotly_chart(charts.panels_chart(panels, runs), key="quality_chart")
    st.caption("faithfulness and answer_relevancy are ragas' LLM-judged scores; embedding_groundedness is ours, by "
               "embedding similarity (not an LLM verdict); groundedness is the pipeline's own judge. Means over the "
               "questions each run scored; hover for scored/failed counts per run.")
    counts = state.view("scored_and_failed", experiment, run_ids, generation)
    st.dataframe(counts, hide_index=True, key="scored_failed_table",
                 column_config={"failed_share": st.column_config.NumberColumn(format="percent")})
    st.caption("scored / failed: run x question pairs summed over the selected runs. A failed question has no value "
               "or an error and is never averaged as 0." + (" judge_sd: the LLM judge's mean standard deviation "
               "over repeated judgements of a question." if "judge_sd" in counts else ""))
    reasons = state.view("failure_reasons", experiment, run_ids, generation)
    if not reasons.empty:
        st.dataframe(reasons, hide_index=True, key="failure_reasons_table")
        st.caption(f"The {failures.TOP_REASONS} most common reasons per metric, grouped by the text before "
                   "their first colon; example: one full message.")

# Full width: with a realistic grid (a dozen runs or more) side-by-side charts get unreadable.
if base:
    st.plotly_chart(state.chart("curve_chart", "curve_points", experiment, run_ids, base, base_metric=base),
                    key="curve_chart")
st.plotly_chart(state.chart("latency_chart", "stage_latency", experiment, run_ids, title="Latency by stage"),
                key="latency_chart")

quality = chosen[0] if chosen else metrics[0]
st.plotly_chart(state.chart("pareto_chart", "quality_latency", experiment, run_ids, quality, quality_name=quality,
                            title=f"{quality} vs latency: Pareto front"), key="pareto_chart")

st.subheader("Which configuration to use")
rankable = [m for m in metrics if better_direction(m) != 0]
if rankable:
    budget = st.columns(3)
    best_metric = budget[0].selectbox("Best on", rankable, key=f"best_metric.{experiment}",
                                      index=rankable.index(quality) if quality in rankable else 0)
    max_latency = budget[1].number_input("Max ms per question (0: no limit)", min_value=0.0, value=0.0,
                                         key=f"best_latency.{experiment}")
    max_cost = budget[2].number_input("Max LLM tokens per question (0: no limit)", min_value=0.0, value=0.0,
                                      key=f"best_cost.{experiment}")
    rec = state.view("best", experiment, run_ids, best_metric, max_latency or None, max_cost or None)
    st.text(recommend.to_text(rec))
    st.caption("The same as `ragkit best` (`--format json` for every number). A failed question counts as the "
               "metric's worst value in the ranking; each eligible run is tested against the best on its difference "
               "and its strict difference, Holm over exactly those tests.")
else:
    st.caption("No metric with a better direction is scored: nothing to rank by.")

st.subheader("Why questions fail")
counts = state.view("failure_class_counts", experiment, run_ids)
if not counts.empty:
    st.plotly_chart(charts.failure_class_chart(counts, runs).update_layout(title="Failure class per question"),
                    key="failure_class_chart")
    st.caption("One class per question of each run (`ragkit failures`; rules in ragkit.analysis.failure_classes): "
               "the cut is the first 5 chunks; evidence at span level where the question has answer spans.")

st.subheader("Judges on/off")
if judges.judge_pairs(runs, state.view("single_factor_pairs", experiment, run_ids)).empty:
    st.caption("No two selected runs differ only in one judge's mode.")
else:
    judge_defaults = [*chosen[:1], *(m for m in CHARTED_GENERATION_METRICS if m in metrics)]
    judge_metrics = st.multiselect("Metrics compared", metrics, key=f"judge_metrics.{experiment}",
                                   default=state.query_list("judge_metrics", metrics, judge_defaults))
    state.set_query(judge_metrics=judge_metrics)
    judged = state.view("judge_effects", experiment, run_ids, judge_metrics)
    if judged.empty:
        st.caption("Choose at least one metric to compare.")
    else:
        st.plotly_chart(charts.forest_chart(judged, runs).update_layout(title="Judge on - off (95% CI)"),
                        key="judge_chart")
        st.dataframe(judges.judge_table(judged, runs), hide_index=True, key="judge_table", column_config={
            name: st.column_config.NumberColumn(format="%.3f")
            for name in ("Δ mean", "CI low", "CI high", "p", "p (Holm)", "strict Δ", "strict CI low",
                         "strict CI high", "strict p (Holm)")
        })
        st.caption(judges.judge_table_note(judged))

with st.expander("Single-factor pairs (detail)"):
    n_pairs = len(state.view("single_factor_pairs", experiment, run_ids))
    # Thousands of runs have tens of thousands of pairs: seconds of work nobody asked for yet.
    if n_pairs > PAIRS_SHOWN_UNASKED and not st.toggle(f"Compare all {n_pairs:,} single-factor pairs on {quality}",
                                                       key=f"pair_detail.{experiment}"):
        st.caption(f"These runs have {n_pairs:,} single-factor pairs (more than {PAIRS_SHOWN_UNASKED:,}): they are "
                   "compared only when asked, with the switch above (the factor answers above do not wait for them).")
    elif (pairs := state.view("pair_effects", experiment, run_ids, [quality])).empty:
        st.caption("No two selected runs differ in exactly one factor.")
    else:
        st.dataframe(pair_table(pairs, runs), hide_index=True, key="pairs_table")
        st.caption(f"{quality}(b) - {quality}(a) over the questions both runs scored, and strictly over every "
                   f"question both were asked ({failure_note([quality])}). " + describe_method(results.unit)
                   + " " + holm_note(holm_family(pairs)) + " W/T/L: questions where b won, tied, lost.")

st.subheader("Runs x metrics")
st.dataframe(state.view("runs_by_metrics", experiment, run_ids, chosen or metrics), hide_index=True,
             key="runs_table")

usage = state.view("llm_usage", experiment, run_ids)
replies = state.view("judge_replies", experiment, run_ids)
evaluated = state.view("evaluation_cost", experiment, run_ids)
if not usage.empty or not replies.empty:
    st.subheader("LLM usage: pipeline")
if not usage.empty:
    st.dataframe(usage.assign(run_id=usage["run_id"].map(labels)).rename(columns={"run_id": "run"}),
                 hide_index=True, key="llm_usage_table")
    st.caption("llm_calls: replies the run used (cached ones too); backend_calls: calls actually sent this time. "
               "Evaluation calls are counted below, not here.")
if not replies.empty:
    st.dataframe(replies, hide_index=True, key="judge_replies_table",
                 column_config={"invalid_share": st.column_config.NumberColumn(format="percent"),
                                "fell_back_share": st.column_config.NumberColumn(format="percent")})
    st.caption("Per judge over the selected runs. invalid_share: replies that could not be parsed (never scored); "
               "fell_back_share: decisions where the judge used its off behaviour instead.")
if not evaluated.empty:
    st.subheader("LLM usage: evaluation")
    st.dataframe(evaluated.assign(run_id=evaluated["run_id"].map(labels)).rename(columns={"run_id": "run"}),
                 hide_index=True, key="evaluation_cost_table")
    st.caption("What scoring the answers cost, apart from what serving them cost: eval:<metric> stages are the "
               "evaluation's LLM calls (ragas' judges), eval its other work (embeddings, string metrics). Not part of "
               "the latency or tokens above.")

labelled = state.label_tables(experiment)
if not labelled.empty:
    from ragkit.labels.tables import AGREEMENT_NOTE, PPI_NOTE, agreement_table, ppi_text_table

    st.subheader("Judges against people")
    if labelled.agreements:
        st.dataframe(agreement_table(labelled), hide_index=True, key="agreement_table")
        st.caption(AGREEMENT_NOTE.format(resamples=labelled.resamples))
        for number, agreement in enumerate(labelled.agreements):
            with st.expander(f"Confusion: {agreement.decision}"):
                st.dataframe(agreement.confusion, key=f"confusion_{number}")
    else:
        st.caption("No item has both a person's label and a judge's value yet (Label page, `ragkit labels`).")
    if not labelled.ppi.empty:
        st.dataframe(ppi_text_table(labelled), hide_index=True, key="ppi_table")
        st.caption(PPI_NOTE)

name_unreadable(experiment, unreadable_notice)
