"""Label: pool the selected runs' top-k chunks and answers, grade them with the configurations
hidden (chunks in a seeded random order), save each pass as a session; below, each judge's
agreement with the labels, with its warnings (a judge that used one grade only, too few documents
for the CIs). The work is ragkit.labels'; the same is `ragkit labels pool / sheet / add /
agreement` on the command line."""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.selection import pick_results
from ragkit.errors import ConfigError
from ragkit.labels.pooling import PoolParams
from ragkit.labels.sheets import person_labels
from ragkit.labels.sources import make_pool
from ragkit.labels.store import CORRECT_NAMES, RELEVANCE_NAMES, LabelStore

st.title("Label")

experiment, results, run_ids = pick_results()
root = state.results_location(experiment)
store = LabelStore(root)
pools = store.pool_ids()

with st.expander("Make a pool of the selected runs", expanded=not pools):
    k = st.number_input("Top-k chunks of each run", min_value=1, max_value=100, value=10)
    seed = st.number_input("Seed of the shown order (recorded)", min_value=0, value=0)
    corpus = st.text_input("Corpus for the chunks' text (dataset folder or corpus name)",
                           value=state.job_manager().dataset_of(root) or "")
    if st.button("Pool", key="make_pool"):
        try:
            pool, texts = make_pool(root, PoolParams(runs=run_ids, k=int(k), seed=int(seed)), corpus or None)
        except ConfigError as error:
            st.error(str(error))
        else:
            store.save_pool(pool)
            st.success(f"Pool {pool.pool_id}: {len(pool.questions)} questions, {pool.chunk_count()} chunks, "
                       f"{pool.answer_count()} answers" + ("" if texts else " (no corpus found: spans without text)"))
            pools = store.pool_ids()

if not pools:
    st.info("No pool yet: make one above (or `ragkit labels pool RESULTS --runs ...`).")
    st.stop()

pool_id = st.selectbox("Pool", pools[::-1], key="pool")
pool = store.pool(pool_id)
annotator = st.text_input("Your name", key="annotator")
question = st.selectbox("Question", pool.questions, key=f"question.{pool_id}",
                        format_func=lambda q: f"{q.question_id}: {q.text[:80]}")
current = store.current(pool_id)
mine = current[current["annotator"] == annotator.strip()] if annotator.strip() else current.iloc[0:0]
st.caption(f"{mine['item_id'].nunique()} of {pool.chunk_count() + pool.answer_count()} items labelled by you in "
           "this pool. Chunks are in a random order; which configuration found them is not shown.")

st.subheader("Question")
st.text(question.text)
relevance: dict[str, int | None] = {}
for number, chunk in enumerate(question.chunks, start=1):
    st.markdown(f"**Chunk {number}**")
    st.text(chunk.text if chunk.text is not None else f"{chunk.doc_id} [{chunk.start_char}, {chunk.end_char})")
    relevance[chunk.item_id] = st.radio(f"Chunk {number} is", [2, 1, 0], index=None, horizontal=True,
                                        format_func=lambda g: RELEVANCE_NAMES[g], key=f"rel.{pool_id}.{chunk.item_id}")
answers: dict[str, tuple[int | None, bool | None]] = {}
for number, answer in enumerate(question.answers, start=1):
    st.markdown(f"**Answer {number}**")
    st.text(answer.answer)
    correct = st.radio(f"Answer {number} is", [2, 1, 0], index=None, horizontal=True,
                       format_func=lambda g: CORRECT_NAMES[g], key=f"cor.{pool_id}.{answer.item_id}")
    grounded = st.radio(f"Answer {number} is grounded in the sources", [True, False], index=None, horizontal=True,
                        format_func=lambda g: "yes" if g else "no", key=f"gro.{pool_id}.{answer.item_id}")
    answers[answer.item_id] = (correct, grounded)

if st.button("Save labels", type="primary", key="save_labels"):
    try:
        rows = person_labels(pool, question.question_id, annotator, relevance, answers)
        if not rows:
            st.warning("Nothing marked on this question yet.")
        else:
            store.add(rows)
            st.success(f"{len(rows)} label(s) saved.")
    except ConfigError as error:
        st.error(str(error))

labelled = state.label_tables(experiment)
if labelled.agreements:
    from ragkit.labels.tables import agreement_caption, agreement_notes, agreement_table

    st.subheader("Judges against people")
    for note in agreement_notes(labelled):  # outside the expander: a judge that cannot be read is said up front
        st.warning(note)
    with st.expander("Agreement of each judge with the people's labels"):
        st.dataframe(agreement_table(labelled), hide_index=True, key="label_agreement_table")
        st.caption(agreement_caption(labelled) + " Confusion tables and prediction-powered means: the Compare "
                   "page's Judges vs people tab (`ragkit labels agreement`).")
