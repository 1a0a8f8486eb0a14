"""Pooling: the union of the runs' top-k, each chunk once, in a seeded order that is not the runs'."""

from __future__ import annotations

import pytest

from ragkit.errors import ConfigError
from ragkit.labels.pooling import PoolParams, build_pool
from ragkit.labels.store import LabelStore
from tests.labels.helpers import ANSWERS, DOCS, RANKED, make_results


def _pool(tmp_path, k=3, seed=0, runs=("r1", "r2", "r3")):
    store = make_results(tmp_path / "results")
    return build_pool(PoolParams(runs=list(runs), k=k, seed=seed), store.read("retrievals"), store.read("questions"),
                      store.read("answers"), DOCS)


@pytest.mark.unit
def test_three_run_pool_is_the_union_of_top_k_each_chunk_once_not_in_the_runs_order(tmp_path):
    pool = _pool(tmp_path, k=3)
    for question in pool.questions:
        spans = [(c.doc_id, c.start_char, c.end_char) for c in question.chunks]
        in_run_order = list(dict.fromkeys(span for run in ("r1", "r2", "r3")
                                          for span in RANKED[run][question.question_id][:3]))
        assert len(spans) == len(set(spans))  # each chunk once
        assert set(spans) == set(in_run_order)  # the union of the three runs' top 3
        assert spans != in_run_order  # shuffled: not the runs' order
        for chunk in question.chunks:  # which runs found it is kept (hidden from annotators)
            assert chunk.runs == sorted(run for run in RANKED if (chunk.doc_id, chunk.start_char, chunk.end_char)
                                        in RANKED[run][question.question_id][:3])
            assert chunk.text == DOCS[chunk.doc_id][chunk.start_char:chunk.end_char]
    # rank 4 of r1 on q1 (d1 51-90) is pooled only because r3 has it in its top 3
    q1 = {(c.doc_id, c.start_char, c.end_char) for c in pool.questions[0].chunks}
    assert ("d2", 63, 88) not in q1  # r2's rank 4, nobody's top 3
    assert pool.chunk_count() == 6 + 6  # counted by hand from RANKED


@pytest.mark.unit
def test_pool_has_each_runs_answer_and_a_stable_seeded_order(tmp_path):
    pool = _pool(tmp_path)
    again = _pool(tmp_path / "again")
    other = _pool(tmp_path / "other", seed=7)
    assert pool.pool_id == again.pool_id and pool.questions == again.questions
    assert pool.pool_id != other.pool_id
    assert {(a.run_id, q.question_id) for q in pool.questions for a in q.answers} == set(ANSWERS)
    assert all(a.item_id != a.run_id and a.run_id not in a.item_id for q in pool.questions for a in q.answers)


@pytest.mark.unit
def test_pool_of_an_unknown_run_names_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"r9.*Valid runs: r1, r2, r3"):
        _pool(tmp_path, runs=("r1", "r9"))


@pytest.mark.unit
def test_pool_is_saved_and_read_back_from_the_results_folder(tmp_path):
    pool = _pool(tmp_path)
    store = LabelStore(tmp_path / "results")
    store.save_pool(pool)
    assert store.pool(pool.pool_id) == pool
    assert store.latest_pool() == pool
    with pytest.raises(ConfigError, match="Valid pools"):
        store.pool("nope")
