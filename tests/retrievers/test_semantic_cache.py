"""The semantic retrieval cache (retriever option ``semantic_cache``) with the real MiniLM
embedder on real paraphrases: a paraphrased repeat query is a hit above the threshold and a miss
below; a hit searches nothing and returns the cached query's chunks; the cache keeps to one scope
and one retriever object (one run); the pipeline records each lookup and the run scores its hit
rate. Off by default, and out of the run id while off."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan
from ragkit.experiments.rows import question_rows
from ragkit.metrics.names import SEMANTIC_CACHE_HIT
from ragkit.pipeline.pipeline import Pipeline
from ragkit.questions import Question, QuestionSet
from ragkit.retrievers import RetrieverParams
from tests.retrievers.test_scope_and_cache import build, build_index

pytestmark = pytest.mark.integration

ASKED = "Why do cats purr?"
PARAPHRASE = "What makes a cat purr?"  # MiniLM cosine to ASKED: 0.923
OTHER = "How long do cats sleep?"  # same topic, another question: cosine 0.474


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder):
    return build_index(tmp_path_factory, minilm_embedder)


def chunks(nodes):
    return [(node.node.node_id, node.score) for node in nodes]


def cosine(embedder, first: str, second: str) -> float:
    """Independently of the cache: the texts embedded as documents, one dot product of unit vectors."""
    vectors = embedder.embed_texts([first, second])
    return float(vectors[0] @ vectors[1])


def test_a_paraphrase_is_a_hit_above_the_threshold_and_reuses_the_cached_hits(index, minilm_embedder):
    retriever = build("dense", index, minilm_embedder, semantic_cache=0.7)
    first = retriever.retrieve(ASKED)
    searched = index.searches
    retriever.set_scope(None)  # the next question (the pipeline calls it once per question)
    again = retriever.retrieve(PARAPHRASE)
    assert index.searches == searched  # answered from the cache: no search
    assert chunks(again) == chunks(first)
    miss, hit = retriever.drain_cache_lookups()
    assert (miss.hit, miss.similarity, miss.cached_query) == (False, None, None)
    assert hit.hit and hit.cached_query == ASKED and hit.threshold == 0.7
    assert hit.similarity == pytest.approx(cosine(minilm_embedder, ASKED, PARAPHRASE), abs=1e-4)
    assert 0.7 <= hit.similarity < 0.95


def test_a_question_never_reuses_its_own_searches(index, minilm_embedder):
    """The gate's reformulations and re-retrievals of one question read like its first search:
    matched, every retry would get the first hits back. Only earlier questions' searches count."""
    retriever = build("dense", index, minilm_embedder, semantic_cache=0.7)
    retriever.set_scope(None)
    retriever.retrieve(ASKED)
    searched = index.searches
    retriever.retrieve(PARAPHRASE)  # the same question's reformulation: searched, not reused
    assert index.searches == searched + 1
    _, own = retriever.drain_cache_lookups()
    assert not own.hit and own.similarity is None
    retriever.set_scope(None)  # the next question sees both searches
    retriever.retrieve(PARAPHRASE)
    assert index.searches == searched + 1
    (later,) = retriever.drain_cache_lookups()
    assert later.hit and later.cached_query in (ASKED, PARAPHRASE)


def test_below_the_threshold_is_a_miss_that_searches(index, minilm_embedder):
    retriever = build("dense", index, minilm_embedder, semantic_cache=0.7)
    retriever.retrieve(ASKED)
    searched = index.searches
    retriever.set_scope(None)
    retriever.retrieve(OTHER)  # the same topic, another question: below 0.7
    assert index.searches == searched + 1
    _, other = retriever.drain_cache_lookups()
    assert not other.hit and other.cached_query == ASKED and other.similarity < 0.7
    # The paraphrase itself is a miss once the threshold is above its similarity (0.923).
    strict = build("dense", index, minilm_embedder, semantic_cache=0.95)
    strict.retrieve(ASKED)
    strict.set_scope(None)
    strict.retrieve(PARAPHRASE)
    _, paraphrase = strict.drain_cache_lookups()
    assert not paraphrase.hit and paraphrase.similarity == pytest.approx(0.923, abs=0.01)
    assert index.searches == searched + 3


def test_the_cache_keeps_to_its_scope_and_its_retriever(index, minilm_embedder):
    retriever = build("hybrid", index, minilm_embedder, semantic_cache=0.7, scope="named_doc")
    retriever.set_scope(None, named=["cats.md"])
    retriever.retrieve(ASKED)
    retriever.set_scope(None, named=["it's-dogs.md"])
    scoped = retriever.retrieve(ASKED)  # the same words, other documents: never the cats' hits
    assert {node.node.metadata["doc_id"] for node in scoped} == {"it's-dogs.md"}
    assert [lookup.hit for lookup in retriever.drain_cache_lookups()] == [False, False]
    another_run = build("hybrid", index, minilm_embedder, semantic_cache=0.7, scope="named_doc")
    another_run.set_scope(None, named=["cats.md"])
    another_run.retrieve(ASKED)
    (lookup,) = another_run.drain_cache_lookups()
    assert not lookup.hit and lookup.similarity is None  # a new run starts empty


def test_off_by_default_out_of_the_key_and_bounded(index, minilm_embedder):
    assert RetrieverParams().semantic_cache is None and "semantic_cache" not in RetrieverParams().key_dump()
    retriever = build("dense", index, minilm_embedder)
    retriever.retrieve(ASKED)
    retriever.retrieve(ASKED)
    assert retriever.drain_cache_lookups() == []
    for bad in (0.0, 1.5):
        with pytest.raises(ValidationError, match="semantic_cache"):
            RetrieverParams(semantic_cache=bad)
    with pytest.raises(ValueError, match="needs an embedder"):
        build("bm25", index, None, semantic_cache=0.7)


def _plan(semantic_cache: float | None):
    corpus = Corpus.from_documents("c", [make_document("cats.md", "Cats purr when they are content.")])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text=ASKED, relevant_docs={"cats.md": 1.0}),
        Question(id="q2", text=PARAPHRASE, relevant_docs={"cats.md": 1.0})])
    params = {} if semantic_cache is None else {"semantic_cache": semantic_cache}
    config = config_from_dict({"name": "c", "dataset": {"path": "unused.jsonl"},
                               "retrievers": [{"type": "dense", "params": params}], "top_k": [3]})
    return make_plan(config, corpus, questions, {}), questions


def test_the_pipeline_records_each_lookup_and_the_run_scores_its_hit_rate(index, minilm_embedder):
    plan, questions = _plan(0.7)
    assert plan.runs[0].run_id != _plan(None)[0].runs[0].run_id  # on: part of the run id
    retriever = build("dense", index, minilm_embedder, semantic_cache=0.7)
    pipeline = Pipeline(retriever, retriever, searchers=(retriever,))
    scores = []
    for question in questions.questions:
        trace = pipeline.answer(question.text)
        (judgement,) = [j for j in trace.judgements if j.judge == "semantic_cache"]
        assert judgement.decision["hit"] is (question.id == "q2")
        assert judgement.decision["action"] == ("reused" if question.id == "q2" else "searched")
        rows = question_rows(plan.runs[0], question, trace)["scores"]
        scores += [row["value"] for row in rows if row["metric"] == SEMANTIC_CACHE_HIT]
    assert scores == [0.0, 1.0] and np.mean(scores) == 0.5  # the run's hit rate
    off_plan, _ = _plan(None)
    trace = Pipeline(build("dense", index, minilm_embedder), build("dense", index, minilm_embedder)).answer(ASKED)
    assert not any(row["metric"] == SEMANTIC_CACHE_HIT
                   for row in question_rows(off_plan.runs[0], questions.questions[0], trace)["scores"])


def test_bm25_with_the_cache_keeps_the_runs_embedder_and_reuses_hits(index, minilm_embedder):
    corpus = Corpus.from_documents("c", [make_document("cats.md", "Cats purr when they are content.")])
    questions = QuestionSet(name="q", format="jsonl", questions=[Question(id="q1", text=ASKED, answers=["x"])])
    config = config_from_dict({"name": "c", "dataset": {"path": "unused.jsonl"}, "embedders": ["minilm"],
                               "retrievers": ["bm25", {"type": "bm25", "params": {"semantic_cache": 0.7}}]})
    embedders = {run.point.retriever.params.get("semantic_cache"): run.point.embedder
                 for run in make_plan(config, corpus, questions, {}).runs}
    assert embedders[None] is None and embedders[0.7] is not None and embedders[0.7].type == "minilm"
    retriever = build("bm25", index, minilm_embedder, semantic_cache=0.7)
    first = retriever.retrieve(ASKED)
    searched = index.searches
    retriever.set_scope(None)  # the next question
    assert chunks(retriever.retrieve(PARAPHRASE)) == chunks(first) and index.searches == searched
