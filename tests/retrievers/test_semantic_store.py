"""The persistent semantic cache (``semantic_cache_store: persistent``, the dynamic-documents
design's): with the real MiniLM embedder, a later run (a new retriever object over the same data
folder) reuses an earlier run's hits for a paraphrase without searching, and records that the
entry came from an earlier run; entries are kept apart per document scope, per index (corpus
version, chunker, embedder) and per retriever; the store's rows read back whole. Off by default
and out of the run id while off."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from ragkit.artefacts.index import Hit
from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan
from ragkit.pipeline.pipeline import Pipeline
from ragkit.questions import Question, QuestionSet
from ragkit.retrievers import RetrieverParams
from ragkit.retrievers.semantic_store import SemanticStore, space_key
from tests.retrievers.test_scope_and_cache import build, build_index
from tests.retrievers.test_semantic_cache import ASKED, OTHER, PARAPHRASE, chunks

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder):
    return build_index(tmp_path_factory, minilm_embedder)


def persistent(index, embedder, root, **params):
    retriever = build(params.pop("type", "dense"), index, embedder, semantic_cache=0.7,
                      semantic_cache_store="persistent", **params)
    retriever.use_semantic_store(root)
    return retriever


def test_a_later_run_reuses_an_earlier_runs_hits_without_searching(index, minilm_embedder, tmp_path):
    first_run = persistent(index, minilm_embedder, tmp_path)
    first_run.set_scope(None)
    first = first_run.retrieve(ASKED)
    (lookup,) = first_run.drain_cache_lookups()
    assert not lookup.hit and lookup.as_decision()["earlier_run"] is False
    assert first_run.flush_semantic_cache() == 1
    assert first_run.flush_semantic_cache() == 0  # written once

    searched = index.searches
    later_run = persistent(index, minilm_embedder, tmp_path)
    later_run.set_scope(None)
    again = later_run.retrieve(PARAPHRASE)
    assert index.searches == searched  # answered from the store: no search
    assert chunks(again) == chunks(first)
    (reused,) = later_run.drain_cache_lookups()
    assert reused.hit and reused.cached_query == ASKED and reused.earlier_run
    assert reused.as_decision()["earlier_run"] is True
    later_run.retrieve(OTHER)  # below 0.7: searched, and its nearest entry is still the stored one
    assert index.searches == searched + 1
    (other,) = later_run.drain_cache_lookups()
    assert not other.hit and other.cached_query == ASKED and other.earlier_run

    # The same run object, without a store, keeps to its run: a new one starts empty.
    in_memory = build("dense", index, minilm_embedder, semantic_cache=0.7)
    in_memory.set_scope(None)
    in_memory.retrieve(PARAPHRASE)
    (fresh,) = in_memory.drain_cache_lookups()
    assert not fresh.hit and fresh.similarity is None and "earlier_run" not in fresh.as_decision()


def test_entries_are_kept_per_document_scope_and_per_retriever(index, minilm_embedder, tmp_path):
    cats = persistent(index, minilm_embedder, tmp_path, type="hybrid", scope="named_doc")
    cats.set_scope(None, named=["cats.md"])
    cats.retrieve(ASKED)
    cats.flush_semantic_cache()

    dogs = persistent(index, minilm_embedder, tmp_path, type="hybrid", scope="named_doc")
    dogs.set_scope(None, named=["it's-dogs.md"])
    scoped = dogs.retrieve(ASKED)  # the same words about another document: never the cats' hits
    assert {node.node.metadata["doc_id"] for node in scoped} == {"it's-dogs.md"}
    (lookup,) = dogs.drain_cache_lookups()
    assert not lookup.hit and lookup.similarity is None
    dogs.set_scope(None, named=["cats.md"])
    dogs.retrieve(PARAPHRASE)  # back on the cats' document: the stored entry answers
    (cats_again,) = dogs.drain_cache_lookups()
    assert cats_again.hit and cats_again.earlier_run

    dense = persistent(index, minilm_embedder, tmp_path, scope="named_doc")
    dense.set_scope(None, named=["cats.md"])
    dense.retrieve(PARAPHRASE)  # another retriever ranks otherwise: hybrid's entries are not its own
    (other_retriever,) = dense.drain_cache_lookups()
    assert not other_retriever.hit and other_retriever.similarity is None
    assert dense.semantic_space(cats.where) != cats.semantic_space(cats.where)
    assert cats.semantic_space(cats.where) != cats.semantic_space(None)


def test_the_space_is_keyed_by_index_retriever_parameters_and_scope():
    base = space_key("index-a", "dense", {"top_k": 5}, None)
    assert base == space_key("index-a", "dense", {"top_k": 5}, None)
    for other in (space_key("index-b", "dense", {"top_k": 5}, None),  # another corpus version/embedder
                  space_key("index-a", "bm25", {"top_k": 5}, None),
                  space_key("index-a", "dense", {"top_k": 6}, None),
                  space_key("index-a", "dense", {"top_k": 5}, "doc_id IN ('a.md')")):
        assert other != base


def test_the_store_reads_back_what_it_wrote_and_skips_a_damaged_row(tmp_path):
    store = SemanticStore(tmp_path)
    row = {"chunk_id": "a:0", "doc_id": "a.md", "chunk_index": np.int64(0), "start_char": 0, "end_char": 4,
           "text": "text", "embed_text": "text", "metadata": "{}"}
    vector = np.array([0.6, 0.8], dtype=np.float32)
    store.add("s", "why?", vector, [Hit(row, 0.5)])
    store.add("t", "other space", vector, [])
    assert store.entries("s") == []  # not flushed yet
    assert store.flush() == 2
    (entry,) = SemanticStore(tmp_path).entries("s")
    assert entry.query == "why?" and np.array_equal(entry.vector, vector)
    assert entry.hits[0].score == 0.5 and entry.hits[0].row["chunk_index"] == 0
    assert entry.hits[0].row["chunk_id"] == "a:0"
    store._db().execute("UPDATE entries SET hits = 'not json' WHERE space = 's'")
    assert SemanticStore(tmp_path).entries("s") == []  # a row that cannot be read is searched again


def test_the_pipeline_flushes_after_each_question(index, minilm_embedder, tmp_path):
    retriever = persistent(index, minilm_embedder, tmp_path)
    Pipeline(retriever, retriever, searchers=(retriever,)).answer(ASKED)
    assert [entry.query for entry in SemanticStore(tmp_path).entries(retriever.semantic_space(None))] == [ASKED]


def test_off_by_default_out_of_the_run_id_and_refused_without_a_cache(index, minilm_embedder):
    assert RetrieverParams().semantic_cache_store == "run"
    assert "semantic_cache_store" not in RetrieverParams(semantic_cache=0.7).key_dump()
    with pytest.raises(ValidationError, match="set semantic_cache"):
        RetrieverParams(semantic_cache_store="persistent")
    with pytest.raises(ValidationError, match="semantic_cache_store"):
        RetrieverParams(semantic_cache=0.7, semantic_cache_store="disk")
    unattached = build("dense", index, minilm_embedder, semantic_cache=0.7, semantic_cache_store="persistent")
    with pytest.raises(ValueError, match="needs a store folder"):
        unattached.retrieve(ASKED)

    corpus = Corpus.from_documents("c", [make_document("cats.md", "Cats purr when they are content.")])
    questions = QuestionSet(name="q", format="jsonl", questions=[Question(id="q1", text=ASKED, answers=["x"])])

    def run_id(params):
        config = config_from_dict({"name": "c", "dataset": {"path": "unused.jsonl"},
                                   "retrievers": [{"type": "dense", "params": params}]})
        return make_plan(config, corpus, questions, {}).runs[0].run_id

    in_memory = run_id({"semantic_cache": 0.7})
    assert run_id({"semantic_cache": 0.7, "semantic_cache_store": "run"}) == in_memory
    assert run_id({"semantic_cache": 0.7, "semantic_cache_store": "persistent"}) != in_memory
