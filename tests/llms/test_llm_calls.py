"""LLMClient (cache, timing, token counts, usage per stage) and parse_json_reply, on a scripted backend."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from ragkit.errors import ConfigError
from ragkit.llms import LLMClient, LLMRoles, llms, parse_json_reply
from ragkit.llms.base import BackendReply, with_retries
from ragkit.registry import ComponentSpec
from tests.doubles import FakeClock
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.unit


class Verdict(BaseModel):
    score: int = Field(ge=0, le=100)
    reason: str


def scripted(replies: list[str] | None = None, **params: Any) -> ScriptedLLM:
    """Tokens counted as words, so usage sums can be checked by hand."""
    return ScriptedLLM(replies or ["ok"], count_words=True, **params)


def test_second_identical_call_is_a_cache_hit_with_no_backend_call(tmp_path):
    backend = scripted(["Paris is the capital."])
    client = LLMClient(backend, tmp_path / "llm_cache")
    first = client.call("Capital of France?", stage="generate")
    second = client.call("Capital of France?", stage="generate")

    assert len(backend.requests) == 1
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.text == first.text == "Paris is the capital."
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)


def test_a_new_client_on_the_same_cache_dir_makes_zero_calls(tmp_path):
    """A re-run (new process, same data dir) is answered entirely from disk."""
    LLMClient(scripted(), tmp_path).call("q", stage="generate")
    rerun_backend = scripted()
    rerun = LLMClient(rerun_backend, tmp_path)
    assert rerun.call("q", stage="generate").cache_hit
    assert rerun_backend.requests == []
    assert rerun.usage_by_stage()[0].backend_calls == 0


def test_cache_entries_are_plain_json_files(tmp_path):
    client = LLMClient(scripted(["hello"]), tmp_path)
    result = client.call("q", stage="generate")
    files = list(tmp_path.rglob("*.json"))
    assert [path.stem for path in files] == [result.key]
    entry = json.loads(files[0].read_text())
    assert entry["text"] == "hello" and entry["backend"] == "scripted"
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    "change",
    [
        {"params": {"temperature": 0.7}},
        {"params": {"seed": 7}},
        {"params": {"model": "other"}},
        {"call": {"max_tokens": 9}},
        {"call": {"system": "Be brief."}},
        {"call": {"schema": Verdict}},
        {"prompt": "Capital of Spain?"},
    ],
)
def test_any_change_in_params_or_request_is_a_miss(tmp_path, change):
    base = LLMClient(scripted(), tmp_path)
    base.call("Capital of France?", stage="s")
    backend = scripted(**change.get("params", {}))
    result = LLMClient(backend, tmp_path).call(change.get("prompt", "Capital of France?"), stage="s",
                                               **change.get("call", {}))
    assert not result.cache_hit and len(backend.requests) == 1


def test_without_a_cache_dir_every_call_reaches_the_backend():
    backend = scripted()
    client = LLMClient(backend, None)
    client.call("q", stage="s")
    assert not client.call("q", stage="s").cache_hit
    assert len(backend.requests) == 2


def test_tokens_time_and_usage_are_summed_per_stage(tmp_path):
    client = LLMClient(scripted(["one two three"]), tmp_path, clock=FakeClock(step=0.5))
    client.call("a b", stage="judge")
    client.call("c d e", stage="judge")
    client.call("a b", stage="judge")  # cache hit: its tokens still count as the stage's cost
    client.call("x", stage="generate")

    usage = {row.stage: row for row in client.usage_by_stage()}
    judge = usage["judge"]
    assert (judge.llm_calls, judge.backend_calls, judge.cache_hit) == (3, 2, False)
    assert (judge.prompt_tokens, judge.completion_tokens) == (2 + 3 + 2, 9)
    # Each miss reads the clock three times (start, after the backend, end): 1.0 s in total, 0.5 s
    # of it in the backend; a hit reads it twice: 0.5 s, and reports the generation time it cached.
    assert judge.seconds == pytest.approx(1.0 + 1.0 + 0.5)
    assert judge.generation_seconds == pytest.approx(0.5 + 0.5 + 0.5)
    assert usage["generate"].as_row()["llm_calls"] == 1


def test_a_cache_hit_reports_the_generation_time_it_saved(tmp_path):
    # miss: start 0, backend done 5.0, end 5.1; hit: start 10.0, end 10.1
    client = LLMClient(scripted(["x"]), tmp_path, clock=FakeClock(readings=[0.0, 5.0, 5.1, 10.0, 10.1]))
    client.call("q", stage="fresh")
    (fresh,) = client.drain_usage()
    client.call("q", stage="cached")
    (cached,) = client.drain_usage()
    assert (fresh.seconds, fresh.replayed_seconds) == (pytest.approx(5.1), 0.0)
    assert cached.seconds == pytest.approx(0.1) and cached.replayed_seconds == pytest.approx(4.9)


def test_a_client_with_its_own_usage_keeps_late_calls_out_of_the_parents_stages(tmp_path):
    # An evaluation that timed out keeps calling in ragas' thread while the next question's
    # pipeline runs: its calls must not land in the pipeline's drained usage.
    from ragkit.errors import BackendUnavailable

    client = LLMClient(scripted(["a", "b"]), tmp_path)
    evaluation = client.with_own_usage()
    client.call("pipeline prompt", stage="generate")
    evaluation.call("late eval prompt", stage="eval:faithfulness")
    assert [(row.stage, row.llm_calls) for row in client.drain_usage()] == [("generate", 1)]
    assert [(row.stage, row.llm_calls) for row in evaluation.drain_usage()] == [("eval:faithfulness", 1)]
    # Same backend and cache: the parent is served the evaluation's cached reply.
    assert client.call("late eval prompt", stage="generate").cache_hit
    # Same outages: an unreachable backend met by the evaluation still stops the run.
    outage = BackendUnavailable("down", backend="scripted", url="http://x")
    with pytest.raises(BackendUnavailable):
        evaluation._reach(lambda: (_ for _ in ()).throw(outage))
    assert client.take_outage() is outage


def test_drain_usage_returns_and_forgets(tmp_path):
    client = LLMClient(scripted(), tmp_path)
    client.call("q", stage="s")
    assert [row.llm_calls for row in client.drain_usage()] == [1]
    assert client.drain_usage() == []
    client.call("q", stage="s")
    (row,) = client.drain_usage()
    assert row.cache_hit and row.backend_calls == 0


def test_schema_reply_is_parsed_and_the_schema_reaches_the_backend(tmp_path):
    backend = scripted(['{"score": 80, "reason": "on topic"}'])
    result = LLMClient(backend, tmp_path).call("rate", stage="judge", schema=Verdict)
    assert result.valid and result.parsed == Verdict(score=80, reason="on topic")
    assert backend.calls[0]["json_schema"]["required"] == ["score", "reason"]


def test_unparseable_reply_is_returned_invalid_with_raw_text_never_a_value(tmp_path):
    client = LLMClient(scripted(["I think it is quite relevant."]), tmp_path)
    result = client.call("rate", stage="judge", schema=Verdict)
    assert (result.valid, result.parsed, result.text) == (False, None, "I think it is quite relevant.")
    assert "no JSON" in result.parse_error
    assert client.usage_by_stage()[0].invalid_replies == 1


def test_text_call_without_schema_is_valid_and_unparsed(tmp_path):
    result = LLMClient(scripted(["plain"]), tmp_path).call("q", stage="s")
    assert (result.valid, result.parsed, result.parse_error) == (True, None, None)


def test_messages_and_system_prompt_are_sent_in_order(tmp_path):
    backend = scripted()
    LLMClient(backend, tmp_path).call([{"role": "user", "content": "hi"}], stage="s", system="sys", max_tokens=5)
    assert backend.requests[0] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert backend.calls[0]["max_tokens"] == 5


PARSE_CASES = [
    ("plain", '{"score": 3, "reason": "x"}', Verdict(score=3, reason="x"), None),
    ("fenced", 'Here:\n```json\n{"score": 4, "reason": "y"}\n```\nDone.', Verdict(score=4, reason="y"), None),
    ("bare fence", '```\n{"score": 5, "reason": "z"}\n```', Verdict(score=5, reason="z"), None),
    ("prose around", 'Sure! The answer is {"score": 6, "reason": "has {braces}"} as requested.',
     Verdict(score=6, reason="has {braces}"), None),
    ("trailing comma", '{"score": 7, "reason": "a, b",}', Verdict(score=7, reason="a, b"), None),
    ("garbage", "no idea, sorry", None, "no JSON object"),
    ("unclosed", '{"score": 1, "reason": "cut off', None, "no JSON object"),
    ("broken json", "{score: 1}", None, "invalid JSON"),
    ("empty", "", None, "empty reply"),
    ("whitespace", "  \n ", None, "empty reply"),
    ("wrong type", '{"score": "high", "reason": "x"}', None, "field 'score'"),
    ("missing field", '{"score": 10}', None, "field 'reason'"),
    ("out of bounds", '{"score": 101, "reason": "x"}', None, "field 'score'"),
]


@pytest.mark.parametrize(("text", "expected", "error_part"), [case[1:] for case in PARSE_CASES],
                         ids=[case[0] for case in PARSE_CASES])
def test_parse_json_reply(text, expected, error_part):
    parsed, error = parse_json_reply(text, Verdict)
    assert parsed == expected
    if error_part is None:
        assert error is None
    else:
        assert error_part in error


def test_retries_back_off_and_stop_on_permanent_errors():
    waits: list[float] = []
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise TimeoutError("slow")
        return "done"

    assert with_retries(flaky, max_retries=3, backoff_s=0.1, is_retryable=lambda e: True, sleep=waits.append) == "done"
    assert waits == [0.1, 0.2]
    with pytest.raises(KeyError):
        with_retries(lambda: {}["x"], max_retries=3, backoff_s=0.1, is_retryable=lambda e: False, sleep=waits.append)
    assert waits == [0.1, 0.2]


def test_params_are_bounded_and_construction_loads_nothing():
    from ragkit.llms.local import LocalLLM, LocalParams

    with pytest.raises(ValueError):
        LocalParams(temperature=2.5)
    with pytest.raises(ValueError):
        LocalParams(timeout_s=5)  # local runs in-process: no transport parameters
    backend = LocalLLM(LocalParams())
    assert backend._client is None


def test_registry_builds_a_registered_backend_and_names_bad_params():
    with llms.registered("scripted", ScriptedLLM):
        assert isinstance(llms.build({"type": "scripted", "params": {"temperature": 1}}), ScriptedLLM)
        with pytest.raises(ConfigError, match="temperature"):
            llms.build({"type": "scripted", "params": {"temperature": 3}})


def test_roles_fall_back_to_the_default_spec():
    roles = LLMRoles.from_config(
        {"default": "local", "roles": {"generator": {"type": "ollama", "params": {"model": "qwen2.5"}}}})
    assert roles.spec_for("generator") == ComponentSpec(type="ollama", params={"model": "qwen2.5"})
    assert roles.spec_for("retrieval_judge") == ComponentSpec(type="local")


def test_builtin_backends_are_registered_in_code():
    assert {"local", "ollama", "openai"} <= set(llms.names())
    for name in ("local", "ollama"):
        assert llms.build(name)._client is None  # construction loads no model and opens no connection


def test_a_cache_salt_asks_again_instead_of_reusing_the_unsalted_reply(tmp_path):
    backend = scripted(["first", "second"])
    client = LLMClient(backend, tmp_path / "llm_cache")
    plain = client.call("Same prompt", stage="judge:x")
    salted = client.call("Same prompt", stage="judge:x", cache_salt="x:prompt_version=2")
    again = client.call("Same prompt", stage="judge:x", cache_salt="x:prompt_version=2")
    assert (plain.text, salted.text, again.text) == ("first", "second", "second")
    assert len(backend.requests) == 2 and again.cache_hit


class CountingLLM(ScriptedLLM):
    loads = 0

    def _create_client(self) -> Any:
        CountingLLM.loads += 1
        return object()

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        self.client()
        return super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)


def test_a_sibling_with_other_backend_params_shares_cache_model_and_usage(tmp_path):
    CountingLLM.loads = 0
    client = LLMClient(CountingLLM(seed=1), tmp_path)
    sibling = client.with_backend_params(seed=2, temperature=0.7)
    assert (client.backend.params.seed, sibling.backend.params.seed) == (1, 2)
    first, resampled = client.call("q", stage="eval"), sibling.call("q", stage="eval")
    assert first.key != resampled.key and not resampled.cache_hit  # a re-sample is its own cache entry
    assert sibling.call("q", stage="eval").cache_hit  # ...kept in the shared cache
    assert CountingLLM.loads == 1  # the model is loaded once, by the original
    (usage,) = client.drain_usage()  # the sibling's calls are drained by the original
    assert (usage.llm_calls, usage.backend_calls) == (3, 2)
    assert sibling.drain_usage() == []
