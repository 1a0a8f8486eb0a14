"""``dataset.documents: questions``: the corpus cut to the documents the chosen questions are about
(their relevant documents, answer spans and source document), a corpus of its own; ``all`` (the
default) keeps every document and the corpus id it had."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare, questions_corpus
from ragkit.questions import Question, QuestionSet
from tests.factories import tiny_experiment, write_beir

pytestmark = pytest.mark.unit

CORPUS = Corpus.from_documents("c", [make_document(doc_id, f"text of {doc_id}") for doc_id in ("a", "b", "c", "d")])


def test_relevant_and_source_documents_are_kept_in_id_order():
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="1", text="one", relevant_docs={"c": 1.0}),
        Question(id="2", text="two", answers=["text"], source_doc="a"),
        Question(id="3", text="three", relevant_docs={"missing": 1.0})])
    cut = questions_corpus(CORPUS, questions)
    assert cut.documents.ids == ["a", "c"] and cut.corpus_id != CORPUS.corpus_id and cut.name == "c"


def test_questions_naming_no_document_of_the_corpus_are_an_error():
    questions = QuestionSet(name="q", format="jsonl", questions=[Question(id="1", text="x",
                                                                          relevant_docs={"zz": 1.0})])
    with pytest.raises(ConfigError, match="name no document of corpus 'c'"):
        questions_corpus(CORPUS, questions)


def test_a_limited_run_plans_over_its_questions_documents_only(tmp_path, isolated_data_dir):
    dataset = write_beir(tmp_path / "beir")
    every = prepare(config_from_dict(tiny_experiment({"path": str(dataset), "limit": 2})), check=False)[0]
    cut = prepare(config_from_dict(tiny_experiment({"path": str(dataset), "limit": 2, "documents": "questions"})),
                  check=False)[0]
    assert every.corpus.documents.ids == ["d1", "d2", "d3"]
    assert cut.corpus.documents.ids == ["d1", "d2"]  # q1 -> d1, q2 -> d2
    assert [q.id for q in cut.questions.questions] == ["q1", "q2"]
    assert {s.chunkset_id for s in cut.chunk_steps}.isdisjoint({s.chunkset_id for s in every.chunk_steps})
