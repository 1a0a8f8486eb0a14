"""Speed of the embedded local LLM, against baselines measured in the same run.

    python benchmarks/bench_local_llm.py [repeats]
    python benchmarks/bench_local_llm.py --raw [repeats]   # ragkit's calls against raw llama-cpp-python

``--raw`` (issue 41, item 3): the same chat messages (a RAG answer prompt under a shared system
prompt, a judge prompt with a JSON schema) sent through ragkit's ``LLMClient`` (no cache) and
straight to a ``llama_cpp.Llama`` of the same GGUF with the same n_ctx, threads (for prompts too:
``n_threads_batch``), seed and sampling (``create_chat_completion``, the call ragkit makes), and, for
context, to one left at llama-cpp-python's default prompt threads (every core), interleaved, each
side's KV cache cleared before every call. Prompt tokens/s is from ``max_tokens=1`` calls; generated tokens/s is the
remaining tokens over the remaining time of a full call; each from the fastest of the repeats
(on a shared machine the slower ones measure the other load). Then the same for a series of distinct
questions under one system prompt without clearing (what a run does: llama.cpp keeps the longest
common prefix of the previous call's tokens).

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import Measurement, print_table

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


SYSTEM = ("You answer questions about the documents given. Use only the passages below; cite them as [1], [2]. "
          "If the passages do not contain the answer, say that you do not know. Keep the answer short.")
PASSAGES = [
    "Rivers erode their beds and banks, carrying sediment downstream; over thousands of years this cuts valleys "
    "and canyons, and where the current slows the sediment settles into floodplains and deltas.",
    "Glaciers carve U-shaped valleys; rivers carve V-shaped ones. Meanders migrate across a floodplain as the outer "
    "bank erodes and the inner bank gains point bars, leaving oxbow lakes when a loop is cut off.",
    "Sediment load depends on discharge and slope. Floods move most of a river's sediment in a few days a year, "
    "and dams trap it, starving deltas downstream of the sand that builds them.",
]
QUESTIONS = ["How do rivers form deltas?", "What leaves oxbow lakes behind?", "Why do dams starve deltas?",
             "When does a river move most of its sediment?"]


def answer_messages(question: str) -> list[dict[str, str]]:
    context = "\n".join(f"[{n}] {text}" for n, text in enumerate(PASSAGES, 1))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}\nAnswer:"}]


def raw_vs_ragkit(repeats: int) -> None:
    """ragkit's LocalLLM calls against raw llama-cpp-python on the same messages and settings."""
    import os

    from llama_cpp import Llama

    from ragkit.llms import LLMClient
    from ragkit.llms.local import LocalLLM, LocalParams, default_threads

    params = LocalParams(max_tokens=MAX_TOKENS)
    backend = LocalLLM(params)
    client = LLMClient(backend, None)
    threads = params.threads or default_threads()
    raw = Llama(model_path=str(backend.model_path()), n_ctx=params.context_window, n_threads=threads,
                n_threads_batch=threads, seed=params.seed, verbose=False)
    # Context: llama-cpp-python's own default for prompts (every core), what ragkit ran before it set it.
    every_core = Llama(model_path=str(backend.model_path()), n_ctx=params.context_window, n_threads=threads,
                       seed=params.seed, verbose=False)
    print(f"threads {threads}, n_threads_batch {threads} (ragkit and raw; raw-every-core: "
          f"{every_core.n_threads_batch}), n_ctx {params.context_window}, load average {os.getloadavg()[0]:.1f}")

    def ragkit_call(messages, max_tokens, schema=None, reset=True):
        if reset:
            backend.client().reset()
        result = client.call(messages, stage="bench", max_tokens=max_tokens, schema=schema)
        return result.seconds, result.prompt_tokens, result.completion_tokens

    def raw_side(model):
        def raw_call(messages, max_tokens, schema=None, reset=True):
            if reset:
                model.reset()
            extra = {"response_format": {"type": "json_object", "schema": Verdict.model_json_schema()}} \
                if schema else {}
            started = time.perf_counter()
            reply = model.create_chat_completion(messages=messages, temperature=params.temperature,
                                                 max_tokens=max_tokens, repeat_penalty=params.repeat_penalty,
                                                 seed=params.seed, **extra)
            usage = reply["usage"]
            return time.perf_counter() - started, usage["prompt_tokens"], usage["completion_tokens"]
        return raw_call

    sides = {"ragkit": ragkit_call, "raw": raw_side(raw), "raw-every-core": raw_side(every_core)}
    for call in sides.values():
        call(answer_messages("warm up"), 4)
    # The answer's reply is a dozen tokens, too few to time decoding by: the paragraph runs to max_tokens.
    cases = {"answer": (answer_messages(QUESTIONS[0]), None),
             "judge (JSON schema)": ([{"role": "user", "content": JUDGE_PROMPT}], Verdict),
             "paragraph": ([{"role": "user", "content": PROMPT}], None)}
    rows = []
    for case, (messages, schema) in cases.items():
        times: dict[str, dict[str, list[float]]] = {side: {"prefill": [], "full": []} for side in sides}
        tokens: dict[str, tuple[int, int]] = {}
        for _ in range(repeats):
            for side, call in sides.items():  # interleaved: load changes hit both sides alike
                seconds, prompt_tokens, _ = call(messages, 1, schema)
                times[side]["prefill"].append(seconds)
                seconds, prompt_tokens, completion_tokens = call(messages, MAX_TOKENS, schema)
                times[side]["full"].append(seconds)
                tokens[side] = (prompt_tokens, completion_tokens)
        speeds = {}
        for side in sides:
            # The fastest of the repeats: on a shared machine the slower ones measure the other load.
            prefill, full = min(times[side]["prefill"]), min(times[side]["full"])
            prompt_tokens, completion_tokens = tokens[side]
            speeds[side] = (prompt_tokens / prefill, (completion_tokens - 1) / max(full - prefill, 1e-3))
            print(f"{case:20} {side:6}: {prompt_tokens} prompt tokens in {prefill:.3f} s = {speeds[side][0]:7.1f} "
                  f"tokens/s; {completion_tokens} generated, {speeds[side][1]:6.1f} tokens/s")
        rows += [Measurement(f"{case}: prompt tokens/s", speeds["ragkit"][0], speeds["raw"][0], "t/s",
                             ">= 0.90x", speeds["ragkit"][0] >= 0.9 * speeds["raw"][0]),
                 Measurement(f"{case}: generated tokens/s", speeds["ragkit"][1], speeds["raw"][1], "t/s",
                             ">= 0.90x", speeds["ragkit"][1] >= 0.9 * speeds["raw"][1]),
                 Measurement(f"{case}: prompt tokens/s, raw on every core (llama-cpp's default)",
                             speeds["raw-every-core"][0], speeds["raw"][0], "t/s", "(context)", None)]
    # A run's calls: distinct questions under one system prompt, the KV cache kept between calls.
    series = dict.fromkeys(sides, 0.0)
    for call in sides.values():
        call(answer_messages("warm up"), 1, reset=True)
    for question in QUESTIONS:
        for side, call in sides.items():  # interleaved, each side its own llama.cpp context
            series[side] += call(answer_messages(question), MAX_TOKENS, reset=False)[0]
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"series of {len(QUESTIONS)} answers, KV cache kept: "
          + ", ".join(f"{side} {seconds:.2f} s" for side, seconds in series.items()))
    rows.append(Measurement("answer series, KV cache kept: time", series["ragkit"], series["raw"], "s",
                            "<= 1.10x", series["ragkit"] <= 1.1 * series["raw"]))
    print_table(rows, "raw llama-cpp")


def main() -> None:
    if "--raw" in sys.argv:
        sys.argv.remove("--raw")
        raw_vs_ragkit(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
        return
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
