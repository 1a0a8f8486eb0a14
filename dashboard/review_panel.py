"""The review section of the question-sets page: accept, edit or reject each question of a
squad-style set (a generated one), then freeze it. Every rule (span re-verification, the
content key) is ragkit.questions.review's; this draws and forwards clicks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import state
from dashboard.safe_text import escape, html_block
from ragkit.errors import ConfigError
from ragkit.questions import catalogue


def _reviewable(entry: dict[str, str]) -> Path | None:
    path = Path(entry["path"])
    questions = path / "questions.jsonl" if path.is_dir() else path
    if entry["format"] not in ("squad", "auto") or questions.suffix != ".jsonl" or not questions.is_file():
        return None
    if "(bundled)" in entry["name"]:
        return None  # the sample ships with the code: never written beside
    return path


def show(entry: dict[str, str]) -> None:
    path = _reviewable(entry)
    if path is None:
        return
    from ragkit.questions.generation import read_rows
    from ragkit.questions.review import decide, edit, freeze, load_review, pending, review_passages

    st.subheader("Review")
    try:
        rows = read_rows(path)
    except ConfigError as error:
        st.error(escape(error))
        return
    documents = state.dataset_documents(str(path))
    texts = {doc_id: document.text for doc_id, document in documents.items()}
    review = load_review(path)
    waiting = pending(rows, review)
    counts = {status: sum(d.status == status for d in review.decisions.values())
              for status in ("accepted", "edited", "rejected")}
    st.caption(", ".join(f"{status} {count}" for status, count in counts.items()) + f", pending {len(waiting)}")
    by_id = {row["id"]: row for row in rows}
    chosen = st.selectbox("Question", list(by_id), key="review_question",
                          format_func=lambda qid: f"{qid} [{_status(review, qid)}] {by_id[qid]['question'][:80]}")
    row = by_id[chosen]
    decision = review.decisions.get(chosen)
    st.markdown(f"**{escape(decision.question if decision and decision.question else row['question'])}** "
                f"({escape(row.get('type') or 'question')})")
    for view in review_passages(row, texts, decision):
        body = f"{escape(view.before)}<mark>{escape(view.answer)}</mark>{escape(view.after)}"
        st.caption(escape(f"document {view.doc_id}"))
        st.markdown(html_block(body), unsafe_allow_html=True)
    accept, reject = st.columns(2)
    if accept.button("Accept", key="review_accept"):
        _save(path, decide(review, chosen, "accepted"))
    if reject.button("Reject", key="review_reject"):
        _save(path, decide(review, chosen, "rejected"))
    with st.expander("Edit"):
        question = st.text_input("Question text", value=row["question"], key=f"edit_q_{chosen}")
        unanswerable = row.get("answerable") is False and not (decision and decision.parts)
        answer = st.text_input("Answer (an exact span of the document)" +
                               (": giving one makes this unanswerable question answerable" if unanswerable else ""),
                               value=row.get("answer") or "", key=f"edit_a_{chosen}")
        if st.button("Save edit", key="review_edit"):
            try:
                new_answer = answer if answer and answer != (row.get("answer") or "") else None
                _save(path, edit(review, row, texts, question=question, answer=new_answer))
            except ConfigError as error:
                st.error(escape(error))
    leave_out = st.checkbox("Leave out questions not reviewed yet", key="freeze_pending")
    if st.button("Freeze", key="review_freeze", type="primary"):
        try:
            frozen = freeze(path, catalogue.catalogue_dir() / "frozen", allow_pending=leave_out)
            name = Path(frozen.path).name
            catalogue.register_question_set(name, Path(frozen.path), "squad")
            st.success(f"Frozen as '{escape(name)}': {frozen.questions} questions; experiments can use it now.")
        except ConfigError as error:
            st.error(escape(error))


def _status(review: Any, question_id: str) -> str:
    decision = review.decisions.get(question_id)
    return decision.status if decision else "pending"


def _save(path: Path, review: Any) -> None:
    from ragkit.questions.review import save_review

    save_review(path, review)
    st.rerun()
