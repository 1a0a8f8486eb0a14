"""The HNSW search's ``ef`` (AnnParams.ef): it reaches LanceDB's query, in dense and hybrid search,
raised to the candidates asked for; a bad value is a one-line error; left unset it changes no id."""

from __future__ import annotations

import numpy as np
import pytest
from lancedb.query import LanceHybridQueryBuilder, LanceVectorQueryBuilder
from pydantic import ValidationError

from ragkit.artefacts.index import AnnParams, ChunkIndex, IndexStore
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare
from tests.artefacts.test_index_scale import _chunks, _unit
from tests.factories import write_beir

pytestmark = pytest.mark.integration

# 2,000 random 32-dim points in 2 partitions: large enough that a graph search keeping only the
# 10 candidates asked for misses neighbours (recall about 0.90) where a wide one finds them (0.98,
# the scalar quantisation's ceiling), on every seed tried.
ROWS, LIMIT = 2_000, 10
VECTORS = _unit(ROWS, seed=1)
QUERIES = _unit(40, seed=2)
HNSW = {"kind": "ivf_hnsw_sq", "min_rows": 1, "num_partitions": 2, "nprobes": 2}


@pytest.fixture(scope="module")
def hnsw(tmp_path_factory) -> ChunkIndex:
    store = IndexStore(tmp_path_factory.mktemp("lancedb"))
    return store.build("hnsw", _chunks(ROWS), VECTORS, ann=AnnParams(**HNSW), fulltext=True)


def _with_ef(index: ChunkIndex, ef: int | None) -> ChunkIndex:
    return ChunkIndex(index._table, has_vectors=True, index_id="hnsw", ann=AnnParams(**HNSW, ef=ef))


def _recall(index: ChunkIndex) -> float:
    truth = [set(np.argsort(-(VECTORS @ q))[:LIMIT].tolist()) for q in QUERIES]
    found = [{int(hit.row["chunk_id"][1:]) for hit in index.dense(q, LIMIT)} for q in QUERIES]
    return float(np.mean([len(t & f) / LIMIT for t, f in zip(truth, found)]))


def test_a_tiny_ef_finds_fewer_true_neighbours_than_a_wide_one(hnsw):
    narrow, wide, default = _recall(_with_ef(hnsw, LIMIT)), _recall(_with_ef(hnsw, ROWS)), _recall(hnsw)
    assert narrow < wide - 0.03  # equal if ef never reached LanceDB
    assert wide >= default >= narrow  # LanceDB's default (1.5 x limit) lies between


def test_an_ef_below_the_candidates_asked_for_is_raised_to_them_not_refused(hnsw):
    # LanceDB refuses ef < k ("ef must be greater than or equal to k"); ef=1 searches as ef=limit.
    one, at_limit = _with_ef(hnsw, 1), _with_ef(hnsw, LIMIT)
    for query in QUERIES[:5]:
        assert [h.row["chunk_id"] for h in one.dense(query, LIMIT)] == \
            [h.row["chunk_id"] for h in at_limit.dense(query, LIMIT)]
    refined = ChunkIndex(hnsw._table, True, "hnsw", ann=AnnParams(**HNSW, refine_factor=4, ef=1))
    assert len(refined.dense(QUERIES[0], LIMIT)) == LIMIT  # ef raised to limit x refine_factor = 40


def test_dense_and_hybrid_pass_ef_only_when_set(hnsw, monkeypatch):
    calls: list[tuple[str, int]] = []
    for builder in (LanceVectorQueryBuilder, LanceHybridQueryBuilder):
        real = builder.ef

        def spy(self, value, _real=real, _name=builder.__name__):
            calls.append((_name, value))
            return _real(self, value)

        monkeypatch.setattr(builder, "ef", spy)
    hnsw.dense(QUERIES[0], 5)
    hnsw.hybrid("cats", QUERIES[0], 5, rrf_k=60)
    assert calls == []  # unset: LanceDB's default, as before ef was a knob
    index = ChunkIndex(hnsw._table, True, "hnsw", ann=AnnParams(**HNSW, ef=64))
    index.dense(QUERIES[0], 5)
    index.dense_many(QUERIES[:2], 5)
    refined = ChunkIndex(hnsw._table, True, "hnsw", ann=AnnParams(**HNSW, refine_factor=30, ef=64))
    refined.dense(QUERIES[0], 5)
    assert calls == [("LanceVectorQueryBuilder", 64), ("LanceVectorQueryBuilder", 64),
                     ("LanceVectorQueryBuilder", 150)]  # 5 x refine 30 = 150 candidates: ef raised to them
    calls.clear()
    index.hybrid("cats", QUERIES[0], 5, rrf_k=60)  # LanceDB hands it on to its vector sub-query
    assert calls[0] == ("LanceHybridQueryBuilder", 64) and set(calls) <= {(b, 64) for b in (
        "LanceHybridQueryBuilder", "LanceVectorQueryBuilder")}


def test_ef_is_bounded_and_hnsw_only():
    assert AnnParams().ef is None
    for ef in (0, 100_001, "x"):
        with pytest.raises(ValidationError):
            AnnParams.model_validate({"kind": "ivf_hnsw_sq", "ef": ef})
    with pytest.raises(ValidationError, match="ef applies to kind 'ivf_hnsw_sq' only, got kind 'ivf_pq'"):
        AnnParams(kind="ivf_pq", ef=64)


def test_a_bad_ef_in_an_experiment_config_is_one_line_naming_it():
    base = {"name": "ef", "dataset": {"path": "unused.jsonl"}, "retrievers": ["dense"], "top_k": [5]}
    with pytest.raises(ConfigError) as raised:
        config_from_dict({**base, "ann": {"kind": "ivf_hnsw_sq", "ef": 0}})
    message = str(raised.value)
    assert "\n" not in message and "ann.ef" in message and "0" in message and "greater than or equal to 1" in message
    with pytest.raises(ConfigError) as raised:
        config_from_dict({**base, "ann": {"kind": "ivf_pq", "ef": 64}})
    assert "\n" not in str(raised.value) and "ef applies to kind 'ivf_hnsw_sq' only" in str(raised.value)


DOCS = {f"d{i}": f"Farm {i} keeps {animal}s and grows {crop}." for i, (animal, crop) in
        enumerate([("cow", "wheat"), ("goat", "barley"), ("hen", "maize"), ("pig", "oats")])}
QUESTIONS = {f"q{i}": (f"which farm grows {crop}", f"d{i}") for i, crop in enumerate(["wheat", "barley"])}
# Computed on main before ef existed (commit 4f41ebd): an ANN setting's ids stay these with ef unset.
PINNED_ANN = {"index": "60d6a3d11a695c9e", "run": "437611f5cafa7576"}


def _ann_plan(dataset, **ann):
    config = config_from_dict({"name": "steps", "dataset": {"path": str(dataset)}, "chunkers": ["document"],
                               "retrievers": ["dense"], "top_k": [2], "embedders": ["minilm"],
                               "ann": {"kind": "ivf_hnsw_sq", "min_rows": 1000, "nprobes": 30, **ann}})
    plan, _ = prepare(config)
    ((run,), (step,)) = plan.runs, [s for s in plan.index_steps if s.embedder is not None]
    return run.run_id, step.index_id


def test_ef_unset_keeps_an_ann_setting_s_index_and_run_ids_and_set_it_changes_them(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    run_id, index_id = _ann_plan(dataset)
    assert {"index": index_id, "run": run_id} == PINNED_ANN
    assert AnnParams(kind="ivf_hnsw_sq").id_fields() == AnnParams(kind="ivf_hnsw_sq").model_dump(
        mode="json", exclude={"ef"})
    run_ef, index_ef = _ann_plan(dataset, ef=64)
    assert run_ef != run_id and index_ef != index_id
