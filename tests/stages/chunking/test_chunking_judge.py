"""Chunking Judge: heuristic profiles, reply parsing and fallbacks on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragkit.chunkers import chunkers
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError, LLMError
from ragkit.llms import LLMClient, llms
from ragkit.stages.base import STAGES
from ragkit.stages.chunking.stage import ChunkingJudge, ChunkingJudgeParams, document_sample
from tests.factories import scripted_llm_class

MARKDOWN = "# Guide\n\n" + "\n\n".join(f"## Part {i}\n\n" + "Some words about this part. " * 30 for i in range(4))
PYTHON = "import os\n\n\n" + "\n\n".join(
    f"def function_{i}(value):\n    '''Return the value plus {i}.'''\n    return value + {i}\n" for i in range(40)
)
PLAIN = "The committee met on Tuesday and discussed the budget in detail. " * 60
SHORT = "A short note about cats and how they purr."


ScriptedLLM = scripted_llm_class()


def reply(chunker: str, params: dict[str, Any] | None = None, justification: str = "why") -> str:
    return json.dumps({"chunker": chunker, "params": params or {}, "justification": justification})


def llm_judge(replies: list[Any], tmp_path, **params: Any) -> tuple[ChunkingJudge, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    return ChunkingJudge(ChunkingJudgeParams(**params), LLMClient(backend, tmp_path)), backend


def doc(text: str, doc_id: str = "doc.txt", **metadata: Any):
    return make_document(doc_id, text, {"file_name": doc_id, **metadata})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "doc_id", "expected"),
    [
        (MARKDOWN, "guide.md", "markdown"),
        (MARKDOWN, "guide.txt", "markdown"),  # headers decide, not the suffix
        (PYTHON, "module.py", "code"),
        (PYTHON, "module.txt", "code"),  # parses as Python and defines functions
        (SHORT, "note.txt", "document"),
        ("# Title\n\n## One\n\nshort.\n", "short.md", "document"),  # short wins over structure
        (PLAIN, "minutes.txt", "recursive"),
        ("# only one header\n\n" + PLAIN, "one.md", "recursive"),  # below min_markdown_headers
        ("```\n# not a header\n## nor this\n```\n" + PLAIN, "fenced.md", "recursive"),
    ],
)
def test_heuristic_picks_the_chunker_from_the_document_profile(text, doc_id, expected):
    spec, judgement = ChunkingJudge(ChunkingJudgeParams(mode="heuristic")).decide(doc(text, doc_id))
    assert spec.type == expected
    assert spec == chunkers.resolve(expected)  # defaults filled in
    assert judgement.judge == "chunking" and judgement.valid and not judgement.fell_back
    assert judgement.decision["chunker"] == expected
    assert judgement.decision["justification"]
    assert judgement.raw_reply is None


@pytest.mark.unit
def test_off_returns_the_default_spec_without_a_judgement_or_a_call(tmp_path):
    backend = ScriptedLLM([reply("markdown")])
    judge = ChunkingJudge(ChunkingJudgeParams(mode="off", default={"type": "token", "params": {"chunk_size": 128}}),
                          LLMClient(backend, tmp_path))
    spec, judgement = judge.decide(doc(MARKDOWN, "guide.md"))
    assert spec == chunkers.resolve({"type": "token", "params": {"chunk_size": 128}})
    assert judgement is None
    assert backend.requests == []
    assert judge.decision_key(doc(MARKDOWN)) is None


@pytest.mark.unit
def test_a_valid_reply_is_resolved_with_its_params(tmp_path):
    judge, _ = llm_judge([reply("recursive", {"chunk_size": 500, "chunk_overlap": 50}, "prose")], tmp_path)
    spec, judgement = judge.decide(doc(PLAIN))
    assert spec == chunkers.resolve({"type": "recursive", "params": {"chunk_size": 500, "chunk_overlap": 50}})
    assert judgement.valid and not judgement.fell_back and judgement.error is None
    assert judgement.decision["justification"] == "prose"
    assert judgement.decision["params"]["chunk_size"] == 500
    assert judgement.raw_reply == reply("recursive", {"chunk_size": 500, "chunk_overlap": 50}, "prose")


@pytest.mark.unit
def test_a_reply_in_a_code_fence_is_read(tmp_path):
    fenced = "Here you go:\n```json\n" + reply("markdown", {"chunk_size": 800}) + "\n```"
    judge, _ = llm_judge([fenced], tmp_path)
    spec, judgement = judge.decide(doc(MARKDOWN))
    assert spec.type == "markdown" and spec.params["chunk_size"] == 800
    assert judgement.valid


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "error_part"),
    [
        (reply("paragraphs"), "not one of the allowed chunkers"),
        (reply("semantic"), "not one of the allowed chunkers"),
        (reply("recursive", {"chunk_size": 100, "chunk_overlap": 200}), "chunk_overlap"),
        (reply("recursive", {"chunk_size": 10}), "chunk_size"),
        (reply("token", {"window": 3}), "unknown parameter 'window'"),
        ('{"chunker": "recursive", "params": {"chunk_size": 500,', "no JSON object"),
        ("I would use markdown.", "no JSON object"),
        ("", "empty reply"),
        ('{"params": {}}', "chunker"),
    ],
)
def test_an_unusable_choice_falls_back_to_the_default_and_records_why(tmp_path, raw, error_part):
    judge, _ = llm_judge([raw], tmp_path, default={"type": "sentence"})
    spec, judgement = judge.decide(doc(MARKDOWN))
    assert spec == chunkers.resolve("sentence")
    assert not judgement.valid and judgement.fell_back
    assert error_part in judgement.error
    assert judgement.decision["action"] == "fell back" and judgement.decision["chunker"] == "sentence"
    assert judgement.raw_reply == raw


@pytest.mark.unit
def test_semantic_is_offered_and_accepted_only_when_allowed(tmp_path):
    judge, backend = llm_judge([reply("semantic")], tmp_path, allow_semantic=True)
    spec, judgement = judge.decide(doc(PLAIN))
    assert spec.type == "semantic" and judgement.valid
    assert "- semantic:" in backend.requests[0][-1]["content"]

    judge, backend = llm_judge([reply("recursive")], tmp_path / "b")
    judge.decide(doc(PLAIN))
    assert "- semantic:" not in backend.requests[0][-1]["content"]


@pytest.mark.unit
def test_a_backend_error_falls_back_to_the_default(tmp_path):
    judge, _ = llm_judge([LLMError("llm 'scripted': down")], tmp_path)
    spec, judgement = judge.decide(doc(PLAIN))
    assert spec == chunkers.resolve("recursive")
    assert judgement.fell_back and not judgement.valid and "down" in judgement.error


@pytest.mark.unit
def test_the_prompt_shows_beginning_middle_and_end_within_the_sample_size(tmp_path):
    text = "BEGIN " + "a" * 5000 + " MIDDLE " + "b" * 5000 + " END"
    sample = document_sample(text, 900)
    assert sample.startswith("BEGIN") and sample.endswith("END") and "MIDDLE" in sample
    assert len(sample) <= 900 + 2 * len("\n[...]\n")
    assert document_sample(SHORT, 900) == SHORT

    judge, backend = llm_judge([reply("recursive")], tmp_path, sample_chars=900)
    judge.decide(doc(text))
    prompt = backend.requests[0][-1]["content"]
    assert "BEGIN" in prompt and "MIDDLE" in prompt and "END" in prompt
    assert len(prompt) < 900 + 1500  # the sample plus a short fixed frame


@pytest.mark.unit
def test_the_same_document_is_decided_once_then_read_from_the_cache(tmp_path):
    judge, backend = llm_judge([reply("markdown")], tmp_path)
    first = judge.decide(doc(MARKDOWN))
    second = judge.decide(doc(MARKDOWN))
    assert first[0] == second[0]
    assert len(backend.requests) == 1
    assert (first[1].cache_hit, second[1].cache_hit) == (False, True)


@pytest.mark.unit
def test_decision_key_follows_document_params_and_model(tmp_path):
    def key(text: str = MARKDOWN, model: str = "scripted", **params: Any) -> str:
        client = LLMClient(ScriptedLLM([reply("markdown")], model=model), tmp_path)
        return ChunkingJudge(ChunkingJudgeParams(**params), client).decision_key(doc(text))

    assert key() == key()
    assert key() != key(text=MARKDOWN + "more")
    assert key() != key(prompt_version=2)
    assert key() != key(model="other")
    assert key() != key(mode="heuristic")
    assert key(mode="heuristic", model="a") == key(mode="heuristic", model="b")  # no model in heuristic mode


@pytest.mark.unit
def test_construction_checks_mode_llm_and_default(tmp_path):
    with pytest.raises(ValueError, match="needs an LLM client"):
        ChunkingJudge(ChunkingJudgeParams(mode="llm"))
    with pytest.raises(ConfigError, match="unknown chunker 'nope'"):
        ChunkingJudge(ChunkingJudgeParams(mode="heuristic", default={"type": "nope"}))
    with pytest.raises(ValueError):
        ChunkingJudgeParams(sample_chars=10)


@pytest.mark.unit
def test_builds_through_the_judges_registry():
    with STAGES.registered("chunking", ChunkingJudge):
        judge = STAGES.build({"type": "chunking", "params": {"mode": "heuristic"}})
    assert isinstance(judge, ChunkingJudge)
    assert judge.decide(doc(PYTHON, "m.py"))[0].type == "code"


@pytest.mark.integration
def test_real_local_model_gives_a_usable_spec_and_a_recorded_judgement(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    judge = ChunkingJudge(ChunkingJudgeParams(sample_chars=600, max_tokens=60), client)
    spec, judgement = judge.decide(doc(MARKDOWN, "guide.md"))
    assert spec.type in chunkers.names()
    assert spec == chunkers.resolve(spec)  # always a valid, fully resolved spec
    assert judgement.raw_reply is not None
    assert judgement.valid or (judgement.fell_back and judgement.error and spec == chunkers.resolve("recursive"))
