"""The junk filters of question generation, on replies the embedded SmolLM2-135M really wrote.

``fixtures/smollm2_replies.json`` holds replies recorded from ``ragkit questions generate
datasets/covidqa_sample --llm local --n 40 --seed 0`` (``fixtures/record_smollm2_replies.py``):
each with its passages, the planned answers and the model's reply as written. Each test switches
its filter off and shows the verdict changes, so it fails without the filter. Two replies quoted
in issue 38 (the same model on a user's filings) are ``from_issue``; the prompt-echo rule has no
recorded reply and is tested on one written to its pattern.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ragkit.llms import LLMClient
from ragkit.llms.parsing import parse_json_reply
from ragkit.questions import load_dataset_corpus
from ragkit.questions.generation import GenerationParams, generate_questions
from ragkit.questions.generation import replies as replies_module
from ragkit.questions.generation.prompts import reply_schema
from ragkit.questions.generation.replies import Verdict, judge_reply
from ragkit.questions.generation.sampling import Passage, Slot
from tests.conftest import SAMPLE_DATASET
from tests.questions.generation_helpers import ANSWER, rule_llm

pytestmark = pytest.mark.unit

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "smollm2_replies.json").read_text(encoding="utf-8"))
REPLIES: list[dict[str, Any]] = RECORDED["replies"]
NEVER = re.compile(r"(?!x)x")


def judge(record: dict[str, Any]) -> Verdict:
    """The verdict on a recorded reply, its passages standing as documents of their own."""
    texts = {f"p{index}": text for index, text in enumerate(record["passages"])}
    passages = tuple(Passage(f"p{index}", "", 0, len(text)) for index, text in enumerate(record["passages"]))
    slot = Slot(record["slot"], record["type"], passages, tuple((s, e) for s, e in record["answers"]))
    parsed, error = parse_json_reply(record["reply"], reply_schema(record["type"]))
    return judge_reply(slot, parsed, error, texts, record["language"], 0.5)


def recorded(reason: str) -> list[dict[str, Any]]:
    found = [record for record in REPLIES if record["reason"] == reason]
    assert found, f"no recorded reply of the model is dropped as {reason}"
    return found


def test_every_recorded_reply_gets_the_reason_recorded_with_it():
    assert [judge(record).reason for record in REPLIES] == [record["reason"] for record in REPLIES]


def test_questions_about_the_text_are_dropped(monkeypatch):
    about = recorded("about_the_text")
    assert {record["question"] for record in about} >= {"What is the answer to this question?"}
    assert all(judge(record).reason == "about_the_text" for record in about)
    monkeypatch.setattr(replies_module, "_ABOUT_THE_TEXT", NEVER)
    assert not any(judge(record).reason == "about_the_text" for record in about)


def test_a_question_written_for_several_answers_is_a_template_and_every_copy_goes(monkeypatch):
    """The model's favourite question, replayed for each planned answer (the answer copied back,
    so no other check stops it): without the template rule its first copy entered the set."""
    template = next(record["question"] for record in recorded("about_the_text"))
    monkeypatch.setattr(replies_module, "junk_reason", lambda question, passage: None)

    def replay(messages: list[dict[str, str]], number: int) -> str:
        return json.dumps({"question": template, "answer": ANSWER.findall(messages[-1]["content"])[0]})

    documents = sorted(load_dataset_corpus(SAMPLE_DATASET) or [], key=lambda d: d.id_)[:4]
    params = GenerationParams(n=4, types=["factoid"])
    result = generate_questions(documents, params, LLMClient(rule_llm(replay), None))
    assert result.rows == [] and [item["reason"] for item in result.dropped] == ["duplicate"] * 4

    monkeypatch.setattr("ragkit.questions.generation.generate.find_templates", lambda written: {})
    kept = generate_questions(documents, params, LLMClient(rule_llm(replay), None))
    assert [row["question"] for row in kept.rows] == [template]  # the first copy, as in the issue's run


def test_the_template_reply_without_the_about_the_text_rule_still_goes_for_no_content_word(monkeypatch):
    """Two rules in depth on the same real replies: "What is the answer to this question?" shares
    no content word with any of its passages."""
    template = [record for record in recorded("about_the_text")
                if record["question"] == "What is the answer to this question?"]
    monkeypatch.setattr(replies_module, "_ABOUT_THE_TEXT", NEVER)
    assert {judge(record).reason for record in template} == {"no_content_word"}
    monkeypatch.setattr(replies_module, "multilingual_content_words", lambda text: ["same"])
    assert "no_content_word" not in {judge(record).reason for record in template}


ISSUE = RECORDED["from_issue"]


def test_an_unanswerable_question_whose_passage_holds_an_answer_of_its_type_is_dropped(monkeypatch):
    apple = next(record for record in ISSUE if record["reason"] == "answer_in_passage")
    verdict = judge(apple)
    assert verdict.reason == "answer_in_passage" and "'60,274'" in verdict.detail and "number" in verdict.detail
    monkeypatch.setattr(replies_module, "answer_held", lambda question, passage: None)
    assert judge(apple).reason is None  # kept as "unanswerable", as in the issue's run


def test_the_issues_quoted_replies_get_their_reasons():
    assert [judge(record).reason for record in ISSUE] == [record["reason"] for record in ISSUE]


def test_a_question_repeating_the_prompts_instructions_is_dropped(monkeypatch):
    """No recorded reply of the model echoed today's instructions (an earlier prompt's example
    was echoed: prompts.py); this reply is written to the pattern, the only one not recorded."""
    record = {"slot": 0, "type": "unanswerable", "language": "en", "answers": [],
              "passages": ["The clinic tested 424 samples from horses in Ireland."],
              "reply": json.dumps({"question": "Write one question in English on the topic of horses?"})}
    assert judge(record).reason == "prompt_echo"
    monkeypatch.setattr(replies_module, "_PROMPT_NGRAMS", set())
    assert judge(record).reason is None
