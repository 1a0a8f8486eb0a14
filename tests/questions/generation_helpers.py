"""A rule-following fake LLM for question generation, and small documents to generate from."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from ragkit.corpus.model import make_document
from ragkit.llms.base import BackendReply
from tests.factories import scripted_llm_class

ANSWER = re.compile(r'Answer(?: \d)?: "(.*?)"\n', re.DOTALL)


def english_documents(count: int = 5, sentences: int = 12) -> list[Any]:
    """Documents of numbered, distinct English sentences (every clause a possible answer)."""
    return [
        make_document(f"doc{d}", " ".join(
            f"The sample number {d}{s} was stored in the freezer of building {d}, room {s}."
            for s in range(sentences)))
        for d in range(count)
    ]


def sectioned_document(doc_id: str = "sectioned") -> Any:
    """A document with three sections in its ``sections`` metadata, as the loaders write it."""
    parts = [" ".join(f"In part {p} the value of item {s} is {p * 100 + s} units." for s in range(6))
             for p in range(3)]
    text, marks = "", []
    for index, part in enumerate(parts):
        marks.append([len(text), f"Section {index}"])
        text += part + "\n\n"
    return make_document(doc_id, text, {"sections": marks})


def reply_copying(question: Callable[[int, list[str]], str]) -> Callable[[list[dict[str, str]], int], str]:
    """A reply rule: the question from ``question(call number, answers in the prompt)``, the
    answers copied back exactly."""
    def rule(messages: list[dict[str, str]], number: int) -> str:
        answers = ANSWER.findall(messages[-1]["content"])
        reply: dict[str, str] = {"question": question(number, answers)}
        if len(answers) == 2:
            reply.update(answer_1=answers[0], answer_2=answers[1])
        elif answers:
            reply["answer"] = answers[0]
        return json.dumps(reply)
    return rule


def distinct_question(number: int, answers: list[str]) -> str:
    return f"Which freezer location is recorded for case {number} of the study?"


def passage_question(number: int, answers: list[str]) -> str:
    """A distinct question sharing a content word with its passage (the answer's first), as the
    generator requires, without containing the whole answer."""
    from ragkit.text import multilingual_content_words

    word = next(iter(multilingual_content_words(answers[0]) if answers else []), "topic")
    return f"Which finding about {word} is reported in case {number}?"


def rule_llm(rule: Callable[[list[dict[str, str]], int], str]) -> Any:
    """A backend that answers each request with ``rule(messages, call number)`` and counts calls."""
    scripted = scripted_llm_class()

    class RuleLLM(scripted):  # type: ignore[misc, valid-type]
        def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
            self.requests.append(messages)
            return BackendReply(text=rule(messages, len(self.requests)), prompt_tokens=7, completion_tokens=3)

    return RuleLLM([])


def ollama_replier() -> Callable[[dict[str, Any]], str]:
    """A scripted model for ``FakeOllama.replier`` (tests/llms/fake_ollama.py), so a child
    process (``ragkit questions generate``, ``ragkit labels judge``) can be pointed at it:
    a generation prompt gets a distinct question on a word of its passage with its answers copied back, a relevance
    judge's prompt a grade 0-3 from the prompt's length (some variety for agreement tables)."""
    rule = reply_copying(passage_question)
    calls = 0

    def reply(body: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        prompt = body["messages"][-1]["content"]
        if '"grade"' in prompt:
            return json.dumps({"grade": len(prompt) % 4, "reason": "scripted"})
        return rule(body["messages"], calls)

    return reply


@contextlib.contextmanager
def scripted_ollama_server(monkeypatch) -> Iterator[Any]:
    """A FakeOllama answering with ``ollama_replier``, made the default backend through the
    environment, so child processes (jobs, a dashboard's children) use it too."""
    from tests.llms.fake_ollama import FakeOllama

    fake = FakeOllama()
    fake.replier = ollama_replier()
    fake.start()
    monkeypatch.setenv("RAGKIT_OLLAMA_URL", fake.url)
    monkeypatch.setenv("RAGKIT_OLLAMA_MODEL", "fake-model")
    try:
        yield fake
    finally:
        fake.stop()
