"""How the drill-down draws one run's answer, its generation metrics and judge decisions for a question.

Answers, judge replies, errors and question text are LLM, corpus or user text: markdown gets them
through ``safe_text.escape``; prompts, decisions and raw replies are shown as code.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.safe_text import escape


def _json(text: Any, empty: Any) -> Any:
    if text is None or pd.isna(text):
        return empty
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def validity_badge(valid: bool, fell_back: bool = False) -> str:
    badge = ":green[valid]" if valid else ":red[invalid]"
    return badge + (" · :orange[fell back]" if fell_back else "")


def citations(answer: pd.Series) -> list[str]:
    """The chunk ids an answer cites, first cited first."""
    value = _json(answer["citations"], [])
    return [str(chunk_id) for chunk_id in value] if isinstance(value, list) else []


def show_answer(answer: pd.Series, ranks: dict[str, int]) -> None:
    """The generated answer, its citations as the ranks of the chunks shown below, and its prompt."""
    st.markdown("**Answer** · " + validity_badge(bool(answer["valid"])))
    if pd.notna(answer["error"]):
        st.caption(f"Error: {escape(answer['error'])}")
    st.markdown(escape(answer["answer"]) if pd.notna(answer["answer"]) and answer["answer"] else "*(no answer)*")
    cited = citations(answer)
    if cited:
        st.caption("Cites: " + ", ".join(f"#{ranks[c]}" if c in ranks else escape(c) for c in cited))
    with st.expander("Prompt"):
        st.code(answer["prompt"] if pd.notna(answer["prompt"]) else "", language=None)


def show_judgement(judgement: Any) -> None:
    """One decision: judge, validity, seconds, the decision as JSON and the raw reply."""
    with st.container(border=True):
        cached = " · cached" if judgement.cache_hit else ""
        st.markdown(f"**{escape(judgement.judge)}** · "
                    f"{validity_badge(bool(judgement.valid), bool(judgement.fell_back))}"
                    f" · {judgement.seconds:.2f} s{cached}")
        if pd.notna(judgement.input_summary) and judgement.input_summary:
            st.caption(escape(judgement.input_summary))
        if pd.notna(judgement.error):
            st.caption(f"Error: {escape(judgement.error)}")
        decision = _json(judgement.decision, {})
        if isinstance(decision, (dict, list)):
            st.json(decision)
        else:
            st.code(str(decision), language=None)
        with st.expander("Raw reply"):
            st.code(judgement.raw_reply if pd.notna(judgement.raw_reply) else "(no LLM reply)", language=None)


def show_verdicts(verdicts: pd.DataFrame) -> None:
    """Each generation metric's value for this answer (with the judge's spread when it judged
    repeatedly) and the reason it has none, or which repeats failed."""
    st.markdown("**Answer quality**")
    for row in verdicts.itertuples():
        value = "not scored" if pd.isna(row.value) else f"{row.value:.3f}"
        spread = getattr(row, "judge_sd", float("nan"))
        st.markdown(f"`{row.metric}` **{value}**" + (f" · judge sd {spread:.3f}" if pd.notna(spread) else ""))
        if pd.notna(row.reason):
            st.caption(f"{row.metric}: {escape(row.reason)}")


def show_failure_class(classes: pd.DataFrame, run_id: str, question_id: str | None) -> None:
    """The question's failure class in this run (``ragkit failures``), with the judge it names."""
    row = classes[(classes["run_id"] == run_id) & (classes["question_id"] == question_id)]
    if row.empty:
        return
    found = row.iloc[0]
    judge = f" ({escape(found['judge'])})" if pd.notna(found["judge"]) and found["judge"] else ""
    detail = f" · {escape(found['detail'])}" if pd.notna(found["detail"]) and found["detail"] else ""
    colour = "green" if found["failure_class"] == "answered well" else "red"
    # RAGChecker's claim-level diagnostics, where the run scored them (columns of the same table).
    claims = " · ".join(f"{name.replace('_', ' ')} {found[name]:.2f}" for name in
                        ("context_utilization", "noise_sensitivity") if name in found.index and pd.notna(found[name]))
    st.markdown(f"Class: :{colour}[{escape(found['failure_class'])}]{judge}{detail}"
                + (f" · {claims}" if claims else ""))
