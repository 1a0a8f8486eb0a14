"""Exact search beside approximate search, end to end: the same grid run exactly and through an
ANN index pairs on the ``ann.kind`` factor in one folder (the Compare page's factor table) and
across two folders (``ragkit compare``), so a user sees what the index costs in quality."""

from __future__ import annotations

import pytest

from ragkit.analysis.comparison import Comparer
from ragkit.analysis.loading import load_results
from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from tests.factories import write_beir

pytestmark = pytest.mark.integration

# 300 one-line documents: above the ANN threshold below, with 2 partitions to train.
DOCS = {f"d{i}": f"Farm {i} keeps animal {i} and grows crop {i * 7 % 300}." for i in range(300)}
QUESTIONS = {f"q{i}": (f"which farm keeps animal {i}", f"d{i}") for i in range(3)}
ANN = {"kind": "ivf_hnsw_sq", "min_rows": 256, "num_partitions": 2, "ef": 32}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("ann-compare")
    base = {"name": "ann", "dataset": {"path": str(write_beir(root / "beir", DOCS, QUESTIONS))},
            "chunkers": ["document"], "retrievers": ["dense", "bm25"], "top_k": [2]}
    exact, approximate = config_from_dict(base), config_from_dict({**base, "ann": ANN})
    run_experiment(exact, root / "exact")
    run_experiment(approximate, root / "ann")
    run_experiment(exact, root / "both")
    run_experiment(approximate, root / "both")  # the same folder: one experiment, both searches
    return root


def test_one_folder_pairs_exact_with_approximate_on_the_ann_factor(folders):
    comparer = Comparer(load_results(folders / "both"))
    ann_pairs = comparer.pairs[comparer.pairs["factor"] == "ann.kind"]
    assert ann_pairs[["value_a", "value_b"]].values.tolist() == [["none", "ivf_hnsw_sq"]]
    effects = comparer.factor_effects(["recall@2"])
    row = effects[effects["factor"] == "ann.kind"].iloc[0]
    assert (row["level_a"], row["level_b"]) == ("none", "ivf_hnsw_sq")
    assert {r.factor: r.level for r in comparer.references()}["ann.kind"] == "none"  # exact is the reference


def test_ragkit_compare_pairs_an_exact_folder_with_its_ann_twin(folders, capsys):
    code = main(["compare", str(folders / "exact"), str(folders / "ann"), "--fail-if", "recall@2 < -0.5"])
    out = capsys.readouterr().out
    assert code == 0 and "2 run pair(s)" in out and "[search none -> ivf_hnsw_sq]" in out
    assert "not compared" not in out  # bm25 by its run id, dense across the index
