"""Runs that differ only in top_k share one search: a retriever searches at the grid's deepest
top_k and keeps its first top_k hits where that is exactly what its own search returns.

Checked on a real LanceDB index whose chunks repeat (the same text in several documents), so
dense and bm25 scores tie: LanceDB breaks those ties differently at different limits, which is
what the ``untied`` rule guards against. Every shared result must equal the direct search at its
own top_k, chunk for chunk and score for score."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragkit.artefacts.index import ChunkIndex, IndexStore
from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan
from ragkit.experiments.runner import run_experiment
from ragkit.hashing import text_sha256
from ragkit.questions import Question, QuestionSet
from ragkit.results import ResultStore
from ragkit.retrievers import retrievers
from ragkit.retrievers.cache import RetrievalCache
from ragkit.settings import get_settings

pytestmark = pytest.mark.integration

SENTENCES = [
    "Cats purr when they are content.", "Dogs bark at strangers at night.", "A cat grooms its fur daily.",
    "The stock market fell after the rate rise.", "Dogs wag their tails when happy.", "Cats sleep most of the day.",
    "Rates rose and the market fell.", "A dog and a cat share the garden.", "Felines purr and dogs growl.",
    "Markets trade stocks, not cats or dogs.", "The cat sat on the warm mat.", "Night falls and the dog barks.",
]
FILLER = "also then indeed moreover besides likewise thus hence".split()
QUERIES = ["why do cats purr", "dogs bark", "market fell", "cat", "dog tails", "stock rate rise", "sleep",
           "felines and dogs", "garden"]
DEPTH = 10
KS = range(1, DEPTH)
SCOPE = ["d1", "d4"]
# (type, params): hybrid at its default fetch_k (every k is the same search) and at a fetch_k below
# the depth (its deeper search fuses other lists: never shared); mmr over 20 candidates.
RETRIEVERS = [("dense", {}), ("bm25", {}), ("hybrid", {}), ("hybrid", {"fetch_k": 4}), ("mmr", {"fetch_k": 20})]


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder) -> ChunkIndex:
    """6 documents of 8 chunks, each two of the sentences above and some filler, every eighth a copy of an earlier
    chunk (often another document's): a copy has the same vector (embedded once per text) and the
    same bm25 score as its original."""
    rng = random.Random(0)
    texts: list[str] = []
    for number in range(48):
        filler = " ".join(rng.choices(FILLER, k=rng.randint(0, 8)))  # lengths vary, as real chunks' do
        fresh = f"{rng.choice(SENTENCES)} {filler} {rng.choice(SENTENCES)}"
        texts.append(rng.choice(texts) if number % 8 == 7 else fresh)
    rows = [(f"d{number // 8}", number % 8, text) for number, text in enumerate(texts)]
    unique = sorted(set(texts))
    vectors = dict(zip(unique, minilm_embedder.embed_texts(unique), strict=True))
    chunks = pd.DataFrame({
        "chunk_id": [f"{doc}:{n}" for doc, n, _ in rows], "doc_id": [doc for doc, _, _ in rows],
        "chunk_index": [n for _, n, _ in rows], "start_char": 0, "end_char": [len(t) for t in texts],
        "text": texts, "embed_text": texts, "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
    })
    vector_rows = np.stack([vectors[text] for text in texts])
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("repeated", chunks, vector_rows)


def build(index, embedder, name, params, top_k):
    return retrievers.build({"type": name, "params": {**params, "top_k": top_k}}, index=index, embedder=embedder)


def hits(retriever, query, scope):
    retriever.set_scope(scope)
    return [(node.node.node_id, node.score) for node in retriever.retrieve(query)]


@pytest.mark.parametrize(("name", "params"), RETRIEVERS, ids=lambda value: str(value))
def test_a_shared_search_gives_each_top_k_exactly_its_own_searchs_hits(index, minilm_embedder, tmp_path,
                                                                       name, params):
    scoped = dict(params, scope="question_doc")
    direct = {(k, query): hits(build(index, minilm_embedder, name, scoped, k), query, SCOPE if k % 2 else None)
              for k in KS for query in QUERIES}
    cache = RetrievalCache(tmp_path / "cache")
    before = index.searches
    for k in KS:  # the shallowest first: its run makes the deeper search the others read
        retriever = build(index, minilm_embedder, name, scoped, k)
        retriever.use_cache(cache)
        retriever.share_searches(DEPTH)
        for query in QUERIES:
            assert hits(retriever, query, SCOPE if k % 2 else None) == direct[k, query], (k, query)
    searched = index.searches - before
    pairs = 2 * len(QUERIES)  # each query unscoped and scoped
    if name == "hybrid" and "fetch_k" in params:  # never shared: one search per k and query
        assert searched == len(KS) * len(QUERIES)
    elif name in ("hybrid", "mmr"):  # always shared: one search per query and scope, at the depth
        assert searched == pairs
    else:  # shared where no score ties at the cut, searched again at k where one does
        assert pairs < searched < len(KS) * len(QUERIES)


def test_lancedb_full_text_search_orders_tied_chunks_by_its_limit(index, minilm_embedder):
    """Why bm25 (and, undocumented either way, dense) shares only untied cuts: on these chunks,
    cutting a deeper full-text search differs from the search at k somewhere. (LanceDB's exact
    vector search ordered the copies alike at every limit here; no document promises it.)"""
    differs = 0
    for query in QUERIES:
        deeper = hits(build(index, minilm_embedder, "bm25", {}, DEPTH), query, None)
        differs += sum(hits(build(index, minilm_embedder, "bm25", {}, k), query, None) != deeper[:k] for k in KS)
    assert differs > 0


def one_question() -> QuestionSet:
    return QuestionSet(name="q", format="jsonl", questions=[Question(id="q1", text="cats", relevant_docs={"d1": 1})])


@pytest.mark.unit
def test_the_plan_searches_once_per_index_and_retriever_at_the_deepest_top_k():
    documents = [make_document("d1", "Cats purr. " * 5), make_document("d2", "Dogs bark. " * 5)]
    corpus = Corpus.from_documents("c", documents)
    questions = one_question()
    config = config_from_dict({
        "name": "depths", "dataset": {"path": "unused.jsonl"}, "chunkers": ["document", "token"],
        "retrievers": ["dense", "bm25", {"type": "bm25", "params": {"score_threshold": 0.5}}], "top_k": [3, 7, 5],
    })
    plan = make_plan(config, corpus, questions)
    depths = {(run.index_id, run.point.retriever.type, run.point.top_k, str(run.point.retriever.params)):
              plan.search_depth(run.index_id, run.point.retriever) for run in plan.runs}
    assert len(depths) == 2 * 3 * 3 and set(depths.values()) == {7}
    # Four searches shared by three top_k each: 2 indexes x (dense, bm25, bm25 with a threshold).
    assert len(plan.search_depths) == 6


@pytest.mark.unit
def test_a_run_that_switches_strategy_shares_the_other_strategies_searches_too():
    corpus = Corpus.from_documents("c", [make_document("d1", "Cats purr. " * 5)])
    questions = one_question()
    config = config_from_dict({
        "name": "switch", "dataset": {"path": "unused.jsonl"}, "retrievers": ["dense", "hybrid"], "top_k": [2, 6],
        "judges": {"strategy": ["off", "heuristic"]},
    })
    plan = make_plan(config, corpus, questions)
    switching = next(run for run in plan.runs if run.point.top_k == 2 and run.point.switches_strategy())
    assert sorted(spec.type for spec in switching.point.searchers()) == ["bm25", "dense", "hybrid"]
    assert {plan.search_depth(switching.index_id, spec) for spec in switching.point.searchers()} == {6}


SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"


def test_a_grid_over_top_k_gives_the_results_of_each_top_k_run_alone(tmp_path, monkeypatch):
    """The whole run: a bm25 grid over top_k 3 and 8 scores and retrieves exactly what each top_k
    run does alone in a data directory of its own, with one search per question instead of two."""
    counted = {"n": 0}
    fulltext = ChunkIndex.fulltext

    def counting(self, *args, **kwargs):
        counted["n"] += 1
        return fulltext(self, *args, **kwargs)

    monkeypatch.setattr(ChunkIndex, "fulltext", counting)
    config = {"name": "ks", "dataset": {"path": str(SAMPLE_DATASET), "format": "squad", "limit": 8},
              "chunkers": [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}], "embedders": [],
              "retrievers": ["bm25"], "top_k": [3, 8]}
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "grid-data"))
    get_settings.cache_clear()
    run_experiment(config_from_dict(config), tmp_path / "grid")
    assert counted["n"] <= 8 + 2  # one search per question, again at k where scores tie at the cut
    alone = []
    for top_k in (3, 8):
        monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / f"data-{top_k}"))
        get_settings.cache_clear()
        run_experiment(config_from_dict({**config, "top_k": [top_k]}), tmp_path / f"alone-{top_k}")
        alone.append(ResultStore(tmp_path / f"alone-{top_k}"))
    grid = ResultStore(tmp_path / "grid")
    for table, keys, columns in (("retrievals", ["run_id", "question_id", "rank"], ["chunk_id", "score"]),
                                 ("scores", ["run_id", "question_id", "metric"], ["value"])):
        together = grid.read(table).sort_values(keys).reset_index(drop=True)
        apart = pd.concat([store.read(table) for store in alone]).sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(together[keys + columns], apart[keys + columns])
