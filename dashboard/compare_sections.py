"""The Compare page's sections, one function each, drawn only when their tab is open.

Each takes the page's selection (``Compared``) and draws from ``state.view``/``state.chart``
(ragkit.analysis, the same engine as ``ragkit report``); none computes a number itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import state
from ragkit.analysis import charts, failures, judges, recommend, views
from ragkit.analysis.comparison import family_adjustment
from ragkit.analysis.notes import adjustment_note, failure_note, reference_line
from ragkit.analysis.report import CUT_RULE, DETECTABLE_NOTE, has_failures, pair_table
from ragkit.analysis.statistics import describe_method
from ragkit.metrics.names import CHARTED_GENERATION_METRICS, GENERATION_METRICS, better_direction


@dataclass(frozen=True)
class Compared:
    """What the page's pickers selected: every section draws these runs on these metrics."""

    experiment: str
    run_ids: list[str]
    runs: pd.DataFrame  # the selected rows of the runs table
    unit: str  # the resampling unit (Results.unit), named in the method notes
    metrics: list[str]  # every metric these runs scored
    chosen: list[str]  # the metrics picked for the page
    base: str | None  # the metric family drawn over k

    @property
    def quality(self) -> str:
        """The metric the Pareto front, the recommendation and the pair detail start from."""
        return self.chosen[0] if self.chosen else self.metrics[0]

    def view(self, name: str, *args):
        return state.view(name, self.experiment, self.run_ids, *args)

    def table(self, table: str, view_name: str, *args) -> pd.DataFrame:
        return state.table(table, view_name, self.experiment, self.run_ids, *args)

    def chart(self, chart: str, view_name: str, *args, title: str = "", **options):
        return state.chart(chart, view_name, self.experiment, self.run_ids, *args, title=title, **options)

    def labelled(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with its run ids replaced by the runs' labels, in a column 'run'."""
        labels = dict(zip(self.runs["run_id"], self.runs["label"]))
        return frame.assign(run_id=frame["run_id"].map(labels)).rename(columns={"run_id": "run"})


def factors(c: Compared) -> None:
    """Each level against its factor's reference: the page's first table, and its chart when asked for."""
    if not c.chosen:
        st.caption("Choose at least one metric.")
        return
    effects = c.view("factor_effects", c.chosen)
    if effects.empty and c.view("single_factor_pairs").empty:
        st.caption("No two selected runs differ in exactly one factor.")
        return
    if effects.empty:
        st.caption("No two levels of a factor could be compared on these metrics: a level lacks them (a cut-off "
                   "beyond its top_k, or a metric it does not score).")
        return
    strict = has_failures(effects)  # then the strict difference leads, in the table and the chart
    st.dataframe(c.table("factor_table", "factor_effects", c.chosen), hide_index=True, key="factor_table")
    references = c.view("factor_references")
    st.caption(reference_line(references.itertuples()) + " Each level against its factor's reference, paired "
               "over every matched setting of the other factors (settings). " + describe_method(c.unit)
               + " " + adjustment_note(family_adjustment(effects)) + " strict Δ: over every question both sides were "
               f"asked, {failure_note(c.chosen)}; signs DISAGREE: it and Δ over scored point opposite ways. A "
               "judge that changes how many chunks reach the generator is compared at the common depth "
               f"('at ...'). {DETECTABLE_NOTE}")
    # The table is the summary a session draws first; the chart, and plotly.js with it (most of the
    # browser's work on a first screen), only when asked for. Bound to the link (`chart=true`).
    if st.toggle("Chart: each level against its reference", key="chart", bind="query-params"):
        st.plotly_chart(c.chart("forest_chart", "factor_effects", c.chosen, strict=strict,
                                title=("Strict: " if strict else "") + "level - reference (95% CI)"),
                        key="factor_chart")


def means(c: Compared) -> None:
    if not c.chosen:
        st.caption("Choose at least one metric.")
        return
    st.plotly_chart(c.chart("metric_bar_chart", "means", c.chosen, title=" · ".join(c.chosen) + " (95% CI)"),
                    key="metric_chart")
    st.caption(CUT_RULE)


def answer_quality(c: Compared) -> None:
    """Generation metrics beside recall@k and latency; scored and failed counts and why they failed."""
    generation = [m for m in GENERATION_METRICS if m in c.metrics]
    if not generation:
        st.caption("These runs score no answer-quality metric (they generate no answers, or were not evaluated).")
        return
    charted = [m for m in CHARTED_GENERATION_METRICS if m in c.metrics] or generation
    recall = next((m for m in [*c.chosen, "recall@5", "recall@10", *reversed(c.metrics)]
                   if m.startswith("recall@") and m in c.metrics), None)
    quality_means = c.view("means", charted + ([recall] if recall else []))
    panels = [("answer quality (95% CI)", quality_means[quality_means["metric"].isin(charted)])]
    if recall:
        panels.append((f"{recall} (95% CI)", quality_means[quality_means["metric"] == recall]))
    panels.append(("pipeline ms/question (95% CI)", c.view("latency_means")))
    st.plotly_chart(charts.panels_chart(panels, c.runs), key="quality_chart")
    st.caption("faithfulness and answer_relevancy are ragas' LLM-judged scores; embedding_groundedness is ours, by "
               "embedding similarity (not an LLM verdict); groundedness is the pipeline's own judge. Means over the "
               "questions each run scored; hover for scored/failed counts per run.")
    counts = c.view("scored_and_failed", generation)
    st.dataframe(counts, hide_index=True, key="scored_failed_table",
                 column_config={"failed_share": st.column_config.NumberColumn(format="percent")})
    st.caption("scored / failed: run x question pairs summed over the selected runs. A failed question has no value "
               "or an error and is never averaged as 0." + (" judge_sd: the LLM judge's mean standard deviation "
               "over repeated judgements of a question." if "judge_sd" in counts else ""))
    reasons = c.view("failure_reasons", generation)
    if not reasons.empty:
        st.dataframe(reasons, hide_index=True, key="failure_reasons_table")
        st.caption(f"The {failures.TOP_REASONS} most common reasons per metric, grouped by the text before "
                   "their first colon; example: one full message.")


def curves_and_latency(c: Compared) -> None:
    # Full width: with a realistic grid (a dozen runs or more) side-by-side charts get unreadable.
    if c.base:
        st.plotly_chart(c.chart("curve_chart", "curve_points", c.base, base_metric=c.base), key="curve_chart")
    st.plotly_chart(c.chart("latency_chart", "stage_latency", title="Latency by stage"), key="latency_chart")
    st.plotly_chart(c.chart("pareto_chart", "quality_latency", c.quality, quality_name=c.quality,
                            title=f"{c.quality} vs latency: Pareto front"), key="pareto_chart")


def best(c: Compared) -> None:
    """The recommendation under a latency and a cost budget (`ragkit best`)."""
    rankable = [m for m in c.metrics if better_direction(m) != 0]
    if not rankable:
        st.caption("No metric with a better direction is scored: nothing to rank by.")
        return
    budget = st.columns(3)
    best_metric = budget[0].selectbox("Best on", rankable, key=f"best_metric.{c.experiment}",
                                      index=rankable.index(c.quality) if c.quality in rankable else 0)
    max_latency = budget[1].number_input("Max ms per question (0: no limit)", min_value=0.0, value=0.0,
                                         key=f"best_latency.{c.experiment}")
    max_cost = budget[2].number_input("Max LLM tokens per question (0: no limit)", min_value=0.0, value=0.0,
                                      key=f"best_cost.{c.experiment}")
    rec = c.view("best", best_metric, max_latency or None, max_cost or None)
    # The verdict first: a name only when the runner-up is significantly worse, else the evidence it lacks.
    (st.success if rec.distinguishable else st.warning)(rec.verdict())
    st.text(recommend.to_text(rec))
    st.caption(f"The same as `ragkit best` (`--format json` for every number). Each mean: {rec.mean_rule()}. "
               "Each eligible run is tested against the best on its difference and its strict difference, one joint "
               "test (step-down minP, the tests' dependence from a wild bootstrap over the shared documents) over "
               "exactly those tests; 'detectable' is the smallest difference each test would find (80% power, "
               "two-sided 5%). `ragkit questions plan` says how many questions a smaller one needs.")


def why_questions_fail(c: Compared) -> None:
    counts = c.view("failure_class_counts")
    if counts.empty:
        st.caption("No question of these runs has a failure class (`ragkit failures`).")
        return
    st.plotly_chart(charts.failure_class_chart(counts, c.runs).update_layout(title="Failure class per question"),
                    key="failure_class_chart")
    st.caption("One class per question of each run (`ragkit failures`; rules in ragkit.analysis.failure_classes): "
               "the cut is the first 5 chunks; evidence at span level where the question has answer spans.")


JUDGE_TABLE_NUMBERS = ("Δ mean", "CI low", "CI high", "sim. CI low", "sim. CI high", "p", "p (adj.)", "strict Δ",
                       "strict CI low", "strict CI high", "strict p (adj.)")


def judges_on_off(c: Compared) -> None:
    if judges.judge_pairs(c.runs, c.view("single_factor_pairs")).empty:
        st.caption("No two selected runs differ only in one judge's mode.")
        return
    judge_defaults = [*c.chosen[:1], *(m for m in CHARTED_GENERATION_METRICS if m in c.metrics)]
    judge_metrics = st.multiselect("Metrics compared", c.metrics, key=f"judge_metrics.{c.experiment}",
                                   default=state.query_list("judge_metrics", c.metrics, judge_defaults))
    state.set_query(judge_metrics=judge_metrics)
    judged = c.view("judge_effects", judge_metrics)
    if judged.empty:
        st.caption("Choose at least one metric to compare.")
        return
    st.plotly_chart(charts.forest_chart(judged, c.runs).update_layout(title="Judge on - off (95% CI)"),
                    key="judge_chart")
    st.dataframe(judges.judge_table(judged, c.runs), hide_index=True, key="judge_table",
                 column_config={name: st.column_config.NumberColumn(format="%.3f") for name in JUDGE_TABLE_NUMBERS})
    st.caption(judges.judge_table_note(judged))


def single_factor_pairs(c: Compared) -> None:
    n_pairs, shown_unasked = len(c.view("single_factor_pairs")), views.PAIRS_SHOWN_UNASKED  # read when drawn
    # Thousands of runs have tens of thousands of pairs: seconds of work nobody asked for yet.
    if n_pairs > shown_unasked and not st.toggle(f"Compare all {n_pairs:,} single-factor pairs on {c.quality}",
                                                       key=f"pair_detail.{c.experiment}"):
        st.caption(f"These runs have {n_pairs:,} single-factor pairs (more than {shown_unasked:,}): they are "
                   "compared only when asked, with the switch above (the factor answers do not wait for them).")
    elif (pairs := c.view("pair_effects", [c.quality])).empty:
        st.caption("No two selected runs differ in exactly one factor.")
    else:
        st.dataframe(pair_table(pairs, c.runs), hide_index=True, key="pairs_table")
        st.caption(f"{c.quality}(b) - {c.quality}(a) over the questions both runs scored, and strictly over every "
                   f"question both were asked ({failure_note([c.quality])}). " + describe_method(c.unit)
                   + " " + adjustment_note(family_adjustment(pairs)) + " W/T/L: questions where b won, tied, lost.")


def runs_by_metrics(c: Compared) -> None:
    st.dataframe(c.view("runs_by_metrics", c.chosen or c.metrics), hide_index=True, key="runs_table")


def llm_usage(c: Compared) -> None:
    """LLM calls and tokens of the pipeline, each judge's invalid replies, and the evaluation apart."""
    usage, replies, evaluated = c.view("llm_usage"), c.view("judge_replies"), c.view("evaluation_cost")
    if usage.empty and replies.empty and evaluated.empty:
        st.caption("These runs made no LLM call.")
    if not usage.empty or not replies.empty:
        st.subheader("Pipeline")
    if not usage.empty:
        st.dataframe(c.labelled(usage), hide_index=True, key="llm_usage_table")
        st.caption("llm_calls: replies the run used (cached ones too); backend_calls: calls actually sent this time. "
                   "Evaluation calls are counted below, not here.")
    if not replies.empty:
        st.dataframe(replies, hide_index=True, key="judge_replies_table",
                     column_config={"invalid_share": st.column_config.NumberColumn(format="percent"),
                                    "fell_back_share": st.column_config.NumberColumn(format="percent")})
        st.caption("Per judge over the selected runs. invalid_share: replies that could not be parsed (never "
                   "scored); fell_back_share: decisions where the judge used its off behaviour instead.")
    if not evaluated.empty:
        st.subheader("Evaluation")
        st.dataframe(c.labelled(evaluated), hide_index=True, key="evaluation_cost_table")
        st.caption("What scoring the answers cost, apart from what serving them cost: eval:<metric> stages are the "
                   "evaluation's LLM calls (ragas' judges), eval its other work (embeddings, string metrics). Not "
                   "part of the latency or tokens above.")


def judges_against_people(c: Compared) -> None:
    """Agreement, confusion and prediction-powered means where the folder has labels (ragkit.labels.tables)."""
    labelled = state.label_tables(c.experiment)
    if labelled.empty:
        st.caption("No labels for this experiment yet (Label page, `ragkit labels`).")
        return
    from ragkit.labels.tables import PPI_NOTE, agreement_caption, agreement_notes, agreement_table, ppi_text_table

    st.subheader("Judges against people")
    if labelled.agreements:
        for note in agreement_notes(labelled):
            st.warning(note)
        st.dataframe(agreement_table(labelled), hide_index=True, key="agreement_table")
        st.caption(agreement_caption(labelled))
        for number, agreement in enumerate(labelled.agreements):
            with st.expander(f"Confusion: {agreement.decision}"):
                st.dataframe(agreement.confusion, key=f"confusion_{number}")
    else:
        st.caption("No item has both a person's label and a judge's value yet (Label page, `ragkit labels`).")
    if not labelled.ppi.empty:
        st.dataframe(ppi_text_table(labelled), hide_index=True, key="ppi_table")
        st.caption(PPI_NOTE)


# Tab label -> section, in the page's order. A label is also the value of the page's `section`
# query parameter (a link opens that tab): renaming one breaks links to it.
SECTIONS = {
    "Factors": factors,
    "Means": means,
    "Answer quality": answer_quality,
    "Curves and latency": curves_and_latency,
    "Best configuration": best,
    "Why questions fail": why_questions_fail,
    "Judges on/off": judges_on_off,
    "Single-factor pairs": single_factor_pairs,
    "Runs x metrics": runs_by_metrics,
    "LLM usage": llm_usage,
    "Judges vs people": judges_against_people,
}
