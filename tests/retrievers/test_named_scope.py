"""The user's per-document scope (``scope: named_doc``): a question that names a document (its
``document`` field) is answered from that document's chunks alone, over a real index of MiniLM
vectors; the gold scope (``question_doc``) and ``all`` keep what they did."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import make_document
from ragkit.pipeline.pipeline import Pipeline
from ragkit.questions import Question, QuestionSet, validate_against_corpus
from ragkit.questions.plain import load_csv, load_plain_jsonl
from tests.retrievers.test_scope_and_cache import RETRIEVERS, build, build_index, doc_ids

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder):
    return build_index(tmp_path_factory, minilm_embedder)


@pytest.mark.parametrize("name", RETRIEVERS)
def test_named_doc_scope_searches_only_the_document_the_question_names(index, minilm_embedder, name):
    retriever = build(name, index, minilm_embedder, scope="named_doc")
    # The gold documents are cats.md; the user chose market.md: the user's choice wins.
    retriever.set_scope(["cats.md"], named=["market.md"])
    assert doc_ids(retriever, "why do cats purr") == {"market.md"}
    assert not retriever.scope_missing


def test_gold_scope_and_all_ignore_the_named_document(index, minilm_embedder):
    gold = build("dense", index, minilm_embedder, scope="question_doc")
    gold.set_scope(["cats.md"], named=["market.md"])
    assert doc_ids(gold, "why do cats purr") == {"cats.md"}
    everything = build("dense", index, minilm_embedder)
    everything.set_scope(["cats.md"], named=["market.md"])
    assert len(doc_ids(everything, "why do cats purr")) == 3


def test_a_question_naming_no_document_searches_everything_recorded(index, minilm_embedder):
    retriever = build("dense", index, minilm_embedder, scope="named_doc")
    trace = Pipeline(retriever, retriever, searchers=(retriever,)).answer("why do cats purr", scope=["cats.md"])
    assert retriever.scope_missing and {n.node.metadata["doc_id"] for n in trace.nodes} == \
        {"cats.md", "it's-dogs.md", "market.md"}
    (judgement,) = [j for j in trace.judgements if j.judge == "scope"]
    assert judgement.decision == {"action": "searched every document",
                                  "reason": "scope is named_doc but the question names no document"}


def test_the_pipeline_passes_the_named_document_to_its_searchers(index, minilm_embedder):
    retriever = build("hybrid", index, minilm_embedder, scope="named_doc")
    trace = Pipeline(retriever, retriever, searchers=(retriever,)).answer(
        "why do cats purr", scope=["cats.md"], documents=["it's-dogs.md"])
    assert trace.nodes and {n.node.metadata["doc_id"] for n in trace.nodes} == {"it's-dogs.md"}
    assert not [j for j in trace.judgements if j.judge == "scope"]


@pytest.mark.unit
def test_the_loaders_read_the_document_field(tmp_path):
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"id": "a", "question": "why?", "answer": "x", "document": "d1"}\n'
                     '{"id": "b", "question": "how?", "answer": "y", "document": ["d2", " d1 ", "d2"]}\n'
                     '{"id": "c", "question": "what?", "answer": "z"}\n', encoding="utf-8")
    assert [q.documents for q in load_plain_jsonl(jsonl)] == [["d1"], ["d2", "d1"], []]
    csv = tmp_path / "q.csv"
    csv.write_text("id,question,answer,document\na,why?,x,d1; d2\nb,how?,y,\n", encoding="utf-8")
    assert [q.documents for q in load_csv(csv)] == [["d1", "d2"], []]


@pytest.mark.unit
def test_the_field_keeps_question_keys_and_unknown_documents_are_reported():
    plain = Question(id="a", text="why?", answers=["x"])
    assert "documents" not in plain.key_dump()  # at its default: every existing key and run stays
    named = Question(id="a", text="why?", answers=["x"], documents=["d1"])
    assert named.content_key() != plain.content_key()
    questions = QuestionSet(name="s", format="jsonl", questions=[named.model_copy(update={"documents": ["nope"]})])
    assert validate_against_corpus(questions, {"d1": make_document("d1", "text")}) == \
        ["question a: its document 'nope' is not in the corpus"]
