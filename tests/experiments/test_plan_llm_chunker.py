"""A chunker that calls an LLM without the Chunking Judge (chunk summaries, llm_semantic) gets the
chunking role's model in its chunk step, which the executor hands to it."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import CHUNKING, make_plan
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet

pytestmark = pytest.mark.unit


def test_a_summaries_chunker_without_the_judge_has_the_chunking_model_in_its_step():
    corpus = Corpus.from_documents("c", [make_document("a.md", "# A\n\nCats purr when content.")])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"a.md": 1.0})])
    config = config_from_dict({"name": "p", "dataset": {"path": "unused.jsonl"}, "chunkers": [
        {"type": "by_file_type", "params": {"summaries": True}}, {"type": "recursive"}]})
    chunking = llms.resolve({"type": "local"})
    plan = make_plan(config, corpus, questions, {CHUNKING: chunking})
    models = {step.chunker.type: step.judge_llm for step in plan.chunk_steps}
    assert models == {"by_file_type": chunking, "recursive": None}
