"""Speed of the embedded local LLM, against baselines measured in the same run.

    python benchmarks/bench_local_llm.py [repeats]

Every call goes through LLMClient without a cache, as a cold experiment would. Measures:
load time; the same prompt with max_tokens=1 (prompt processing only: the baseline that
separates prefill from decoding); free generation; schema-constrained generation against the
same JSON request without the grammar (grammar cost); and a cached re-run. Prints tokens/s
and the ratios between them.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

PROMPT = "Write a detailed paragraph about how rivers shape the landscape over thousands of years."
JUDGE_PROMPT = (
    "Question: What is the capital of France?\nPassage: Paris is the capital and largest city of France.\n"
    "Is the passage relevant to the question? Reply in JSON with relevant (yes/no), score (0-100) and a "
    "reason of two sentences."
)
MAX_TOKENS = 128


class Verdict(BaseModel):
    relevant: Literal["yes", "no"]
    score: int = Field(ge=0, le=100)
    reason: str = Field(max_length=200)


def timed_calls(client, prompt: str, repeats: int, **kwargs) -> tuple[float, int, int]:
    """Median seconds per call, and prompt/completion tokens of the last call."""
    seconds = []
    for _ in range(repeats):
        # llama.cpp reuses the KV cache of a repeated prompt prefix; clear it so every call
        # pays for its prompt, as distinct questions in an experiment do.
        client.backend.client().reset()
        result = client.call(prompt, stage="bench", **kwargs)
        seconds.append(result.seconds)
    return statistics.median(seconds), result.prompt_tokens, result.completion_tokens


def main() -> None:
    from ragkit.llms import LLMClient
    from ragkit.llms.local import LocalLLM, LocalParams

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    backend = LocalLLM(LocalParams(max_tokens=MAX_TOKENS))
    started = time.perf_counter()
    backend.client()
    print(f"model load: {time.perf_counter() - started:.2f} s ({backend.model_name})")

    client = LLMClient(backend, None)
    client.call("Hi", stage="warm-up", max_tokens=4)
    prefill_s, prompt_tokens, _ = timed_calls(client, PROMPT, repeats, max_tokens=1)
    free_s, _, free_tokens = timed_calls(client, PROMPT, repeats)
    json_prefill_s, _, _ = timed_calls(client, JUDGE_PROMPT, repeats, max_tokens=1)
    json_s, _, json_tokens = timed_calls(client, JUDGE_PROMPT, repeats, schema=Verdict)

    loose = LLMClient(LocalLLM(LocalParams(max_tokens=MAX_TOKENS, constrained_json=False)), None)
    loose_s, _, loose_tokens = timed_calls(loose, JUDGE_PROMPT, repeats, schema=Verdict)
    loose_valid = loose.call(JUDGE_PROMPT, stage="bench", schema=Verdict).valid

    decode_free = (free_tokens - 1) / max(free_s - prefill_s, 1e-3)
    decode_json = (json_tokens - 1) / max(json_s - json_prefill_s, 1e-3)
    print(f"prompt processing : {prompt_tokens} tokens in {prefill_s:.3f} s = "
          f"{prompt_tokens / prefill_s:7.1f} tokens/s")
    print(f"free generation   : {free_tokens} tokens in {free_s:.3f} s = {free_tokens / free_s:7.1f} tokens/s "
          f"end to end, {decode_free:7.1f} tokens/s decoding")
    print(f"JSON-schema reply : {json_tokens} tokens in {json_s:.3f} s = {json_tokens / json_s:7.1f} tokens/s "
          f"end to end, {decode_json:7.1f} tokens/s decoding")
    print(f"JSON, no grammar  : {loose_tokens} tokens in {loose_s:.3f} s = {loose_tokens / loose_s:7.1f} tokens/s "
          f"end to end, reply valid: {loose_valid}")
    print(f"ratio decoding / prompt processing speed: {decode_free / (prompt_tokens / prefill_s):.3f}")
    print(f"ratio constrained / free decoding speed : {decode_json / decode_free:.3f} (grammar cost)")
    print(f"ratio constrained / unconstrained JSON reply time: {json_s / loose_s:.2f}")

    with tempfile.TemporaryDirectory() as cache_dir:
        cached = LLMClient(backend, Path(cache_dir))
        cold = cached.call(JUDGE_PROMPT, stage="bench", schema=Verdict)
        warm = cached.call(JUDGE_PROMPT, stage="bench", schema=Verdict)
        print(f"cached re-run     : {warm.seconds * 1000:.2f} ms vs {cold.seconds:.3f} s cold, "
              f"ratio {warm.seconds / cold.seconds:.4f}, reply valid: {warm.valid}")


if __name__ == "__main__":
    main()
