"""ragkit.analysis.pairing: factors, levels and fair single-factor pairs."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.analysis.pairing import factor_levels, single_factor_pairs
from tests.analysis.helpers import judge_run, run_row

pytestmark = pytest.mark.unit


def _pairs(runs: list[dict]) -> set[tuple]:
    pairs = single_factor_pairs(pd.DataFrame(runs))
    return {(p.run_a, p.run_b, p.factor, p.value_a, p.value_b) for p in pairs.itertuples()}


def test_single_factor_pairs_on_a_two_by_two_grid():
    assert _pairs([
        run_row("a", "token", "bm25", 5, **{"chunker.chunk_size": 256}),
        run_row("b", "token", "bm25", 10, **{"chunker.chunk_size": 256}),
        run_row("c", "sentence", "bm25", 5),
        run_row("d", "sentence", "bm25", 10),
    ]) == {("a", "b", "top_k", "5", "10"), ("c", "d", "top_k", "5", "10"),
           ("c", "a", "chunker", "sentence", "token"), ("d", "b", "chunker", "sentence", "token")}


def test_bm25_pairs_with_dense_and_hybrid_whatever_their_embedder():
    # bm25 has no embedder: that factor does not apply to it, so it matches any embedder.
    runs = [run_row("bm25", retriever="bm25"),
            run_row("dense", retriever="dense", embedder="minilm"),
            run_row("hybrid", retriever="hybrid", embedder="minilm"),
            run_row("dense_bge", retriever="dense", embedder="bge")]
    assert _pairs(runs) == {
        ("bm25", "dense", "retriever", "bm25", "dense"), ("bm25", "hybrid", "retriever", "bm25", "hybrid"),
        ("bm25", "dense_bge", "retriever", "bm25", "dense"), ("dense", "hybrid", "retriever", "dense", "hybrid"),
        ("dense_bge", "dense", "embedder", "bge", "minilm"),
    }


def test_a_factor_missing_on_one_side_does_not_pair_two_other_differences():
    # bm25 k=5 vs dense k=10 differ in retriever and top_k: not a single-factor pair.
    runs = [run_row("bm25", retriever="bm25", top_k=5), run_row("dense", retriever="dense", top_k=10,
                                                                    embedder="minilm")]
    assert _pairs(runs) == set()


def test_component_params_count_with_their_component():
    pairs = single_factor_pairs(pd.DataFrame([
        run_row("dense", retriever="dense"),
        run_row("hybrid", retriever="hybrid", **{"retriever.rrf_k": 60}),
        run_row("hybrid30", retriever="hybrid", **{"retriever.rrf_k": 30}),
    ])).set_index(["run_a", "run_b"])
    assert set(pairs["factor"]) == {"retriever"}
    # Levels name the parameters that vary among runs of the same retriever, everywhere.
    assert pairs.loc[("dense", "hybrid"), ["value_a", "value_b"]].tolist() == ["dense", "hybrid(rrf_k=60)"]
    assert pairs.loc[("hybrid30", "hybrid"), ["value_a", "value_b"]].tolist() == ["hybrid(rrf_k=30)",
                                                                                  "hybrid(rrf_k=60)"]


def test_levels_are_missing_where_a_factor_does_not_apply():
    levels = factor_levels(pd.DataFrame([run_row("bm25"), run_row("dense", retriever="dense", embedder="minilm")]))
    assert levels.loc["bm25", "embedder"] is None
    assert levels.loc["dense", "embedder"] == "minilm"


def test_the_depth_column_is_not_a_factor():
    # A rerank judge keeping 5 of 10 chunks changes the depth; the pair still differs in one factor.
    runs = [{**judge_run("off", "off"), "depth": 10}, {**judge_run("on", "llm"), "depth": 5}]
    assert _pairs(runs) == {("off", "on", "judge.rerank", "off", "llm")}


def test_new_config_columns_pair_automatically():
    pairs = single_factor_pairs(pd.DataFrame([
        run_row("off", **{"judge.retrieval.enabled": False}),
        run_row("on", **{"judge.retrieval.enabled": True}),
        run_row("on_k10", top_k=10, **{"judge.retrieval.enabled": True}),
    ]))
    assert pairs[["run_a", "run_b", "factor", "value_a", "value_b"]].values.tolist() == [
        ["off", "on", "judge.retrieval.enabled", "False", "True"], ["on", "on_k10", "top_k", "5", "10"]]


@pytest.mark.parametrize(("listed_first", "listed_second", "baseline"), [
    # (run "x" config, run "y" config, which run must be run_a); x is listed first on purpose.
    ({"judge.rerank": "llm"}, {"judge.rerank": "off"}, "y"),
    ({"judge.rerank": "heuristic"}, {"judge.rerank": "off"}, "y"),
    ({"judge.rerank": "llm"}, {"judge.rerank": "heuristic"}, "y"),
    ({"judge.rerank": "off"}, {"judge.rerank": "llm"}, "x"),
    ({"generator": True}, {"generator": False}, "y"),
    ({"judge.retrieval.enabled": True}, {"judge.retrieval.enabled": False}, "y"),
    ({"top_k": 10, "retriever.top_k": 10}, {"top_k": 5, "retriever.top_k": 5}, "y"),
    ({"top_k": 2, "retriever.top_k": 2}, {"top_k": 10, "retriever.top_k": 10}, "x"),
    ({"chunker": "token"}, {"chunker": "sentence"}, "y"),
])
def test_pair_direction_puts_the_baseline_first(listed_first, listed_second, baseline):
    common = {"judge.rerank": "off", "generator": False, "judge.retrieval.enabled": False}
    runs = pd.DataFrame([run_row("x", **{**common, **listed_first}), run_row("y", **{**common, **listed_second})])
    runs["chunker"] = [listed_first.get("chunker", "token"), listed_second.get("chunker", "token")]
    pairs = single_factor_pairs(runs)
    assert len(pairs) == 1
    assert pairs.iloc[0]["run_a"] == baseline


def test_judge_mode_pairs_as_one_factor_with_its_parameters_and_llm():
    found = {(a, b): rest for a, b, *rest in _pairs([
        judge_run("llm", "llm"), judge_run("off", "off"), judge_run("heuristic", "heuristic"),
        judge_run("llm_top10", "llm", top_n=10), judge_run("llm_other_model", "llm", llm="ollama:qwen2.5"),
    ])}
    assert found[("off", "heuristic")] == ["judge.rerank", "off", "heuristic"]
    assert found[("llm", "llm_top10")] == ["judge.rerank", "llm(top_n=5, llm=local:smollm2)",
                                           "llm(top_n=10, llm=local:smollm2)"]
    assert found[("llm", "llm_other_model")] == ["judge.rerank", "llm(top_n=5, llm=local:smollm2)",
                                                 "llm(top_n=5, llm=ollama:qwen2.5)"]
    assert {factor for factor, _, _ in found.values()} == {"judge.rerank"}


def test_the_generator_llm_joins_the_generator_factor():
    pairs = single_factor_pairs(pd.DataFrame([run_row("on", generator=True, **{"llm.generator": "local:smollm2"}),
                                              run_row("off", generator=False)]))
    assert pairs[["run_a", "run_b", "factor", "value_a", "value_b"]].values.tolist() == [
        ["off", "on", "generator", "False", "True"]]


def _pairs_one_by_one(runs: pd.DataFrame) -> list[tuple]:
    """Every pair of runs checked by hand: the levels of exactly one factor differ where both apply,
    the baseline (smaller sort key) first."""
    from ragkit.analysis.pairing import level_order

    runs = runs.reset_index(drop=True)
    levels = factor_levels(runs)
    orders = {factor: level_order(runs, levels, factor) for factor in levels.columns}
    found = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            differing = [f for f in levels.columns if levels.iat[i, levels.columns.get_loc(f)] is not None
                         and levels.iat[j, levels.columns.get_loc(f)] is not None
                         and levels.iat[i, levels.columns.get_loc(f)] != levels.iat[j, levels.columns.get_loc(f)]]
            if len(differing) != 1:
                continue
            factor = differing[0]
            a, b = levels.iat[i, levels.columns.get_loc(factor)], levels.iat[j, levels.columns.get_loc(factor)]
            first, second = (i, j) if orders[factor][a] < orders[factor][b] else (j, i)
            found.append((runs.at[first, "run_id"], runs.at[second, "run_id"], factor,
                          levels.iat[first, levels.columns.get_loc(factor)],
                          levels.iat[second, levels.columns.get_loc(factor)]))
    return found


def test_single_factor_pairs_of_a_random_grid_are_the_pairs_found_one_by_one():
    import numpy as np

    rng = np.random.default_rng(7)
    runs = pd.DataFrame([run_row(f"r{i:02d}", str(rng.choice(["token", "sentence", "recursive"])),
                                 str(rng.choice(["bm25", "dense", "hybrid"])), int(rng.choice([3, 5, 10])),
                                 **{"chunker.chunk_size": int(rng.choice([128, 256]))})
                         for i in range(40)])
    pairs = single_factor_pairs(runs)
    expected = _pairs_one_by_one(runs)
    assert len(expected) > 20
    assert list(pairs.itertuples(index=False, name=None)) == expected


def _ann_run(run_id: str, kind: str | None, retriever: str = "dense", **params) -> dict:
    """A run as the plan writes it: `ann.*` columns only where the index is approximate."""
    row = run_row(run_id, retriever=retriever, embedder=None if retriever == "bm25" else "minilm")
    if kind is not None:
        row.update({"ann.kind": kind, "ann.min_rows": 100_000, "ann.num_partitions": None,
                    "ann.num_sub_vectors": None, "ann.nprobes": 20, "ann.refine_factor": None, **params})
    return row


def test_exact_and_approximate_search_pair_as_one_ann_factor_with_exact_first():
    runs = [_ann_run("exact", None), _ann_run("hnsw", "ivf_hnsw_sq"),
            _ann_run("pq", "ivf_pq", **{"ann.refine_factor": 10}),
            _ann_run("pq50", "ivf_pq", **{"ann.refine_factor": 10, "ann.nprobes": 50})]
    assert _pairs(runs) == {
        ("exact", "hnsw", "ann.kind", "none", "ivf_hnsw_sq"),
        ("exact", "pq", "ann.kind", "none", "ivf_pq(nprobes=20)"),
        ("exact", "pq50", "ann.kind", "none", "ivf_pq(nprobes=50)"),
        ("hnsw", "pq", "ann.kind", "ivf_hnsw_sq", "ivf_pq(nprobes=20)"),
        ("hnsw", "pq50", "ann.kind", "ivf_hnsw_sq", "ivf_pq(nprobes=50)"),
        ("pq", "pq50", "ann.kind", "ivf_pq(nprobes=20)", "ivf_pq(nprobes=50)"),
    }


def test_ann_does_not_apply_to_a_run_without_vectors():
    # bm25 runs never get an ANN index (it is on vectors): bm25 still pairs with an approximate dense run.
    runs = [_ann_run("bm25", None, retriever="bm25"), _ann_run("dense", "ivf_pq")]
    assert _pairs(runs) == {("bm25", "dense", "retriever", "bm25", "dense")}
    assert factor_levels(pd.DataFrame(runs)).loc["bm25", "ann.kind"] is None
