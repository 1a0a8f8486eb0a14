"""Our document metrics equal ranx's on a real run where a chunk is a whole document.

SciFact (BEIR) with the `document` chunker and bm25 only (no embedding), through the real
experiment machinery into a results folder. ranx then scores the uncut `retrievals` table (a Run
from the ranks) against the BEIR qrels file, read independently of ragkit's loader, at every k
the run scored; each mean must equal the mean of our `scores` rows to 1e-9.
"""

from __future__ import annotations

import csv

import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.metrics.names import parse_metric
from ragkit.results import ResultStore
from tests.conftest import require_shared_dataset

pytestmark = pytest.mark.integration

# ranx's names for our document families.
RANX_NAMES = {"ndcg": "ndcg", "recall": "recall", "precision": "precision", "map": "map", "mrr": "mrr",
              "hit": "hit_rate"}


@pytest.mark.filterwarnings("ignore:.*unsafe cast")
def test_scifact_document_metrics_equal_ranx_at_every_scored_k(tmp_path):
    import ranx

    beir = require_shared_dataset("scifact") / "beir"
    config = config_from_dict({
        "name": "scifact-ranx", "dataset": {"path": str(beir), "format": "beir", "split": "test"},
        "chunkers": [{"type": "document", "params": {"contextualize": True}}], "embedders": [],
        "retrievers": ["bm25"], "top_k": 100,
    })
    run_experiment(config, tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    scores, retrievals = store.read("scores"), store.read("retrievals")
    assert scores["run_id"].nunique() == 1 and scores["error"].isna().all()
    assert scores["question_id"].nunique() == 300

    with (beir / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    qrels: dict[str, dict[str, int]] = {}
    for row in rows:
        if int(row["score"]) > 0:
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    assert len(qrels) == 300
    assert not retrievals.duplicated(["question_id", "doc_id"]).any()  # one chunk per document
    run = {question_id: {doc_id: float(1000 - rank) for doc_id, rank in zip(group["doc_id"], group["rank"])}
           for question_id, group in retrievals.groupby("question_id")}
    assert len(run) == 300 and max(len(ranking) for ranking in run.values()) == 100

    ours = scores.groupby("metric")["value"].mean()
    compared = {}
    for name, value in ours.items():
        parsed = parse_metric(name)
        if parsed.family in RANX_NAMES and parsed.budget is None:
            compared[name] = (f"{RANX_NAMES[parsed.family]}@{parsed.k}" if parsed.k else RANX_NAMES[parsed.family],
                              value)
    expected_ks = {1, 3, 5, 10, 20, 50, 100}
    assert {f"{family}@{k}" for family in RANX_NAMES for k in expected_ks} | {"mrr"} <= set(compared)

    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), sorted({ranx_name for ranx_name, _ in compared.values()}))
    for name, (ranx_name, value) in compared.items():
        assert value == pytest.approx(theirs[ranx_name], abs=1e-9), (name, value, theirs[ranx_name])
