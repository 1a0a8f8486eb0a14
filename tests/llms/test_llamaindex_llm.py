"""ClientLLM: a LlamaIndex LLM whose calls go through LLMClient (cache, stage, tokens), on a scripted backend."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.llms.llamaindex_llm import ClientLLM
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()


def client_llm(replies, tmp_path, **kwargs) -> tuple[ClientLLM, ScriptedLLM, LLMClient]:
    backend = ScriptedLLM(replies)
    client = LLMClient(backend, tmp_path)
    return ClientLLM(client, stage="eval:test", **kwargs), backend, client


def test_complete_is_one_cached_call_recorded_under_the_stage(tmp_path):
    llm, backend, client = client_llm(["Paris."], tmp_path)
    assert isinstance(llm, LLM)
    first = llm.complete("Capital of France?")
    again = llm.complete("Capital of France?")
    assert first.text == again.text == "Paris."
    assert backend.requests == [[{"role": "user", "content": "Capital of France?"}]]
    assert (first.raw["cache_hit"], again.raw["cache_hit"]) == (False, True)
    (usage,) = client.usage_by_stage()
    assert (usage.stage, usage.llm_calls, usage.backend_calls) == ("eval:test", 2, 1)
    assert llm.last_result.text == "Paris."


def test_chat_keeps_the_roles(tmp_path):
    llm, backend, _ = client_llm(["Fine."], tmp_path)
    response = llm.chat([ChatMessage(role=MessageRole.SYSTEM, content="Be brief."),
                         ChatMessage(role=MessageRole.USER, content="How are you?")])
    assert response.message.content == "Fine." and response.message.role == MessageRole.ASSISTANT
    assert backend.requests == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How are you?"}],
    ]


def test_per_call_sampling_options_are_ignored_and_max_tokens_is_honoured(tmp_path):
    """ragas passes n, temperature and stop; the backend's own params decide (and key the cache)."""
    llm, backend, client = client_llm(["a"], tmp_path, max_tokens=20)
    llm.complete("x", n=3, temperature=0.3, stop=["\n"])
    llm.complete("x", temperature=0.9)
    llm.complete("x", max_tokens=5)
    keys = [record.key for record in client.records()]
    assert keys[0] == keys[1] != keys[2] and len(backend.requests) == 2
    assert llm.metadata.num_output == 20 and llm.metadata.model_name == "scripted"


def test_stream_complete_yields_the_whole_reply(tmp_path):
    llm, _, _ = client_llm(["all at once"], tmp_path)
    assert [part.text for part in llm.stream_complete("x")] == ["all at once"]


def test_async_calls_reach_the_client_and_errors_propagate(tmp_path):
    llm, _, client = client_llm(["async reply", LLMError("down")], tmp_path)
    assert asyncio.run(llm.acomplete("one")).text == "async reply"
    with pytest.raises(LLMError, match="down"):
        asyncio.run(llm.achat([ChatMessage(role=MessageRole.USER, content="two")]))
    assert [record.stage for record in client.records()] == ["eval:test"]


def test_a_timeout_returns_on_time_and_the_late_reply_still_lands_in_the_cache(tmp_path):
    release, replied = threading.Event(), threading.Event()

    class SlowLLM(ScriptedLLM):
        def _chat(self, messages, *, json_schema, max_tokens):
            release.wait(60)
            try:
                return super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)
            finally:
                replied.set()

    client = LLMClient(SlowLLM(["late"]), tmp_path)
    llm = ClientLLM(client, stage="eval:test")
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(llm.acomplete("slow"), timeout=0.2))
    assert not replied.is_set()  # on time: the caller gave up while the call still waited for its reply
    release.set()
    assert replied.wait(60)
    deadline = time.perf_counter() + 60  # the reply is recorded just after it returns, in the call's thread
    while not client.records() and time.perf_counter() < deadline:
        time.sleep(0.02)
    assert llm.complete("slow").raw["cache_hit"]


def test_a_stage_name_is_required(tmp_path):
    with pytest.raises(ValueError, match="stage"):
        ClientLLM(LLMClient(ScriptedLLM(["x"]), tmp_path), stage=" ")
