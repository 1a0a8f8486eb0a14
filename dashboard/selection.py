"""The experiment and run pickers shared by Compare, drill-down and Export.

What they select lives in ``st.query_params`` (exp, runs), so a page URL reproduces the view
and the selection carries over between these pages.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.safe_text import escape


def pick_results(max_runs: int | None = None, default_runs: int | None = None):
    """(experiment name, Results, chosen run ids); stops the page when there is nothing to show."""
    experiment, results = pick_experiment()
    return experiment, results, pick_runs(experiment, results, max_runs, default_runs)


def pick_experiment():
    """(experiment name, Results) of the experiment picker; stops the page when there is nothing to show."""
    experiments = state.experiments()
    if not experiments:
        st.info(f"No results yet under `{state.results_root()}`: run an experiment first.")
        st.stop()
    experiment = st.selectbox("Experiment", experiments, index=state.query_choice("exp", experiments),
                              key="pick_experiment")
    if experiment is None:  # not with a non-empty list of experiments and an index
        st.stop()
    results = state.load_results(experiment)
    if results.runs.empty:
        st.info(f"Experiment '{escape(experiment)}' has no runs yet.")
        st.stop()
    return experiment, results


def pick_runs(experiment: str, results, max_runs: int | None = None, default_runs: int | None = None,
              widget: bool = True) -> list[str]:
    """The chosen run ids: the runs picker, or with ``widget=False`` the link's choice as that picker
    would start with it (a page whose pickers are folded away draws no chip per run)."""
    runs = results.runs
    labels = dict(zip(runs["run_id"], runs["label"]))
    run_ids = list(labels)
    default = run_ids[: default_runs or max_runs or len(run_ids)]
    if not widget:
        state.set_query(exp=experiment)
        return state.query_list("runs", run_ids, default)[: max_runs or None]
    chosen = st.multiselect(
        "Runs", run_ids, default=state.query_list("runs", run_ids, default)[: max_runs or None],
        format_func=lambda run_id: labels.get(run_id, run_id), max_selections=max_runs,
        key=f"pick_runs.{experiment}.{max_runs}",
    )
    # All runs selected is the default: keep the link short by leaving it out.
    state.set_query(exp=experiment, runs=None if chosen == default else chosen)
    if not chosen:
        st.info("Choose at least one run.")
        st.stop()
    return chosen


def name_unreadable(experiment: str, placeholder) -> None:
    """Name in ``placeholder`` (made under the pickers, filled once the page has read what it
    shows) the files of the folder that could not be read; the page showed the rest."""
    lines = state.unreadable(experiment)
    if lines:
        placeholder.warning("\n\n".join(escape(line) for line in lines))
