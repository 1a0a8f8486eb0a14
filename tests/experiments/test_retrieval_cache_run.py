"""The retrieval cache through whole runs: a re-run into a new results folder and a sibling
configuration perform 0 searches; changing the retriever's parameters searches again; the
results are identical and the latency rows still carry what the searches cost."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragkit.artefacts.index import ChunkIndex
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore

pytestmark = pytest.mark.integration

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
# bm25 needs no embedding, so the test measures searches, not MiniLM.
CONFIG = {"name": "cached", "dataset": {"path": str(SAMPLE_DATASET), "format": "squad", "limit": 6},
          "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}}], "embedders": [],
          "retrievers": ["bm25"], "top_k": [5]}


@pytest.fixture
def searches(monkeypatch):
    counted = {"n": 0}
    original = ChunkIndex.fulltext

    def fulltext(self, *args, **kwargs):
        counted["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ChunkIndex, "fulltext", fulltext)
    return counted


def test_a_rerun_or_a_sibling_searches_nothing_and_new_params_search_again(tmp_path, searches):
    run_experiment(config_from_dict(CONFIG), tmp_path / "first")
    assert searches["n"] == 6
    run_experiment(config_from_dict(CONFIG), tmp_path / "again")  # a fresh results folder
    assert searches["n"] == 6
    # A sibling configuration: the same retrieval under a judge that does not search.
    sibling = {**CONFIG, "name": "sibling", "judges": {"rerank": "heuristic"}}
    run_experiment(config_from_dict(sibling), tmp_path / "sibling")
    assert searches["n"] == 6
    changed = {**CONFIG, "name": "changed", "retrievers": [{"type": "bm25", "params": {"score_threshold": 0.1}}]}
    run_experiment(config_from_dict(changed), tmp_path / "changed")
    assert searches["n"] == 12

    first, again = ResultStore(tmp_path / "first"), ResultStore(tmp_path / "again")
    keys = ["run_id", "question_id", "rank"]
    pd.testing.assert_frame_equal(first.read("retrievals").sort_values(keys).reset_index(drop=True),
                                  again.read("retrievals").sort_values(keys).reset_index(drop=True))
    # A cached search counts the time the search took: the retrieve stage is never free.
    stages = again.read("stages")
    retrieve = stages[stages["stage"] == "retrieve"]
    assert len(retrieve) == 6 and (retrieve["seconds"] > 0).all()
