"""Runs: start a job from YAML, follow live progress, cancel and resume. Question-generation jobs
(started on the Question sets page) are listed too, kind "questions", progress in LLM calls
(extractive: questions), and once done their outcome ("done · kept 5 of 40 (12%): poor yield"), a
poor yield as a warning."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.safe_text import escape
from ragkit.errors import ConfigError
from ragkit.yaml_input import load_yaml

REFRESH_S = 2.0

st.title("Runs")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


with st.expander("Start a job from an experiment YAML"):
    text = st.text_area("Experiment YAML", height=200, placeholder="name: ...\ndataset: {path: ...}")
    if st.button("Start", disabled=not text.strip()):
        try:
            config = load_yaml(text, "experiment YAML")
            if not isinstance(config, dict):
                raise ConfigError("experiment YAML: expected a mapping of fields (name, dataset, ...) at the top level")
            job = state.job_manager().start(config)
            st.success(f"Started job {job.job_id}.")
        except ConfigError as error:
            st.error(escape(str(error)))


@st.fragment(run_every=REFRESH_S)
def jobs_panel() -> None:
    manager = state.job_manager()
    jobs = manager.list()
    if not jobs:
        st.info("No job yet: start one on the New experiment page or above.")
        return
    st.dataframe(
        pd.DataFrame(
            [
                {"job": j.job_id, "kind": j.kind, "experiment": j.experiment, "state": j.state_text(),
                 "progress": (j.done / j.total) if j.total else 0.0, "done": j.done, "total": j.total,
                 "elapsed": _duration(j.elapsed_s), "ETA": _duration(j.eta_s), "now": j.detail or "",
                 "created": j.created}
                for j in jobs
            ]
        ),
        hide_index=True,
        column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)},
    )
    job_id = st.selectbox("Job", [j.job_id for j in jobs], key="runs_job")
    info = next(j for j in jobs if j.job_id == job_id)
    fraction = info.done / info.total if info.total else 0.0
    st.progress(fraction, text=escape(f"{info.state_text()} · {info.done}/{info.total or '?'} "
                                      f"{info.unit} · "
                                      f"elapsed {_duration(info.elapsed_s)} · ETA {_duration(info.eta_s) or '-'}"))
    if info.detail:  # an index build: the question count stands still meanwhile, and this says why
        st.caption(escape(info.detail))
    if info.error:
        st.error(escape(info.error))
    elif info.outcome and info.outcome.get("poor"):
        st.warning(escape(f"{info.outcome['summary']}. Next: {info.outcome.get('advice') or 'see the log'}"))
    cancel, resume, _ = st.columns([1, 1, 4])
    if cancel.button("Cancel", disabled=info.state not in ("queued", "running"), key="runs_cancel"):
        manager.cancel(job_id)
        st.rerun(scope="fragment")
    if resume.button("Resume", disabled=info.state not in ("cancelled", "interrupted", "failed"), key="runs_resume"):
        try:
            manager.resume(job_id)
        except ConfigError as error:
            st.error(escape(str(error)))
        st.rerun(scope="fragment")
    st.caption(f"Results: {escape(str(info.out_dir))}")
    st.code(info.log_tail or "(no output yet)", language=None)


jobs_panel()
