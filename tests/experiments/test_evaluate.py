"""What the generation metrics are given: the answer, the final chunks, and the gold passages."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document, NodeWithScore, TextNode

from ragkit.experiments.evaluate import SPAN_CONTEXT_CHARS, reference_contexts, sample_for
from ragkit.pipeline.trace import Trace
from ragkit.questions import AnswerSpan, Question
from ragkit.stages.answer.generator import Answer

pytestmark = pytest.mark.unit

TEXT = "x" * 1000 + "The answer is here." + "y" * 1000
DOCS = {"d1": Document(id_="d1", text=TEXT)}
START = TEXT.index("The answer")
QUESTION = Question(id="q1", text="where?", relevant_docs={"d1": 1.0}, answers=["here"],
                    spans=[AnswerSpan(doc_id="d1", start=START, end=START + 19)])


def test_a_reference_context_is_the_span_with_a_margin_on_each_side():
    (passage,) = reference_contexts(QUESTION, DOCS)
    assert passage == TEXT[START - SPAN_CONTEXT_CHARS: START + 19 + SPAN_CONTEXT_CHARS]
    assert "The answer is here." in passage
    assert reference_contexts(QUESTION, {}) == []  # a span into a missing document gives nothing


def test_the_sample_holds_the_answer_the_final_chunks_and_the_first_reference_answer():
    trace = Trace(question="where?", nodes=[NodeWithScore(node=TextNode(id_="c", text="chunk text"), score=1.0)],
                  answer=Answer(text="Here [1].", citations=["c"], prompt="p", valid=True))
    sample = sample_for(QUESTION, trace, DOCS)
    assert (sample.answer, sample.contexts, sample.reference) == ("Here [1].", ["chunk text"], "here")
    assert len(sample.reference_contexts) == 1
    assert sample_for(QUESTION, Trace(question="where?"), DOCS).answer == ""


def test_a_multi_part_answer_gives_one_reference_part_each_its_first_alternative():
    parted = Question(id="q2", text="what and where?", relevant_docs={"d1": 1.0},
                      answer_parts=[["here", "there"], ["now"]])
    assert sample_for(parted, Trace(question="what?"), DOCS).reference_parts == ["here", "now"]
    assert sample_for(QUESTION, Trace(question="where?"), DOCS).reference_parts is None  # one part
