"""Compare: first what each factor does (each level against the factor's reference level, named in
the experiment or its first level, paired over the other factors; the strict difference leads
where questions failed), then, each in a tab of its own: metric means with 95% CIs, answer quality
beside recall@k and latency, curves over k, latency and the Pareto front, the recommendation
(`ragkit best`), why questions fail (`ragkit failures`), judge on/off pairs, single-factor pairs
(when there are more than PAIRS_SHOWN_UNASKED, only when asked), the runs x metrics table, LLM
calls and tokens (pipeline and evaluation apart, each judge's share of invalid replies), and
judges against people when the folder has labels (agreement, confusion, prediction-powered means;
ragkit.labels.tables); a warning when the selected runs used different question sets, corpora or
evaluation models. Every number comes from ragkit.analysis (through state.view, and its main
figures through state.chart), the same engine as `ragkit report`; the sections are in
dashboard/compare_sections.py.

Only the open tab runs and is sent to the browser (stateful tabs: a click reruns the page), and the
first tab draws its factor table first and its chart when asked for (`chart=true` in the link): a
browser's first screen is one table, not six charts and a dozen tables (the browser's drawing is
most of a session's time under load).

Latency, the Pareto front and LLM usage count the pipeline's stages only; the evaluation's
`eval:*` LLM calls have their own table.

The selection (experiment, runs, metrics, curve, judge metrics, open tab as `section`) lives in
st.query_params: the URL is shareable. The runs, metrics and curve pickers are folded in an
expander (open: `pickers=true`), so a first screen draws no chip per run or metric; folded, the
link's selection is the page's.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.compare_sections import SECTIONS, Compared
from dashboard.selection import name_unreadable, pick_experiment, pick_runs
from ragkit.metrics.names import HEADLINE_METRICS

st.title("Compare runs")

experiment, results = pick_experiment()
# The runs, metrics and curve pickers fold away, bound to the link (`pickers=true` opens them): a
# first screen draws no chip per run and metric (drawing is most of a session's time); folded,
# the link's selection holds, as the pickers would start with it.
pickers = st.expander("Runs, metrics and the curve over k", key="pickers", bind="query-params")
with pickers:
    # Bound to the link, the expander tracks its state: ``open`` is never None here.
    run_ids = pick_runs(experiment, results, widget=bool(pickers.open))
selection_line = st.empty()  # what the pickers hold, named once they are read
unreadable_notice = st.empty()  # filled at the end, once the page has read its tables
metrics = state.view("metric_names", experiment, run_ids)
if not metrics:
    st.info("These runs have no scores yet.")
    name_unreadable(experiment, unreadable_notice)
    st.stop()

for difference in state.view("selection_differences", experiment, run_ids):
    st.warning(f"Hard to compare: {difference}. Comparisons use the questions both runs were asked "
               "(`ragkit compare` refuses such folders unless --allow-different).")
headline = [m for m in HEADLINE_METRICS if m in metrics]
linked = state.query_list("metrics", metrics, headline or metrics[:1])
bases = sorted({m.split("@", 1)[0] for m in metrics if "@" in m})
curve = state.query_choice("curve", bases, "recall")
if pickers.open:
    with pickers:
        chosen = st.multiselect("Metrics", metrics, default=linked, key=f"metrics.{experiment}")
        base = st.selectbox("Curve over k", bases, index=curve, key=f"curve.{experiment}")
else:
    chosen, base = linked, bases[curve] if curve is not None else None
state.set_query(metrics=chosen, curve=base)
selection_line.caption(f"{len(run_ids)} of {len(results.runs)} runs · metrics: {', '.join(chosen) or 'none'}"
                       + (f" · curve over k: {base}" if base else ""))
state.view("read_metrics", experiment, run_ids, chosen, base)

compared = Compared(experiment=experiment, run_ids=run_ids, runs=results.runs[results.runs["run_id"].isin(run_ids)],
                    unit=results.unit, metrics=metrics, chosen=chosen, base=base)
# Bound to the `section` query parameter, so the tabs track which is open: the others draw nothing.
for tab, draw in zip(st.tabs(list(SECTIONS), key="section", bind="query-params"), SECTIONS.values()):
    if tab.open:
        with tab:
            draw(compared)

name_unreadable(experiment, unreadable_notice)
