"""What a generation run yielded, against what was asked, with a verdict and what to do next.

A yield is poor when under half of the asked questions are kept (``POOR_KEEP_RATE``), or when
fewer than ``MIN_FOR_COMPARISON`` are kept: with fewer questions a paired comparison of two
configurations cannot separate differences smaller than about 0.15 in recall (a standard error
of sd/sqrt(n) ~ 0.4/sqrt(30) ~ 0.07 per difference), so a grid on it names no winner. The
verdict names the top drop reasons and the next step that addresses them; it goes to the CLI's
last line, ``generation.json`` (``outcome``) and a background job's status.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

POOR_KEEP_RATE = 0.5
MIN_FOR_COMPARISON = 30
EMBEDDED_MODEL = "smollm2-135m-instruct-q4_1"  # the local backend's bundled model (ragkit.llms.local)
# Measured (benchmarks/README.md, "Generated question sets against people's"): 1 of 24 replies of
# the embedded model kept on the bundled COVID-QA sample (16 about the text, 7 not a question).
EMBEDDED_KEEP_RATE = 0.04

_JUNK = ("about_the_text", "prompt_echo", "no_content_word", "duplicate", "not_a_question", "invalid_reply",
         "empty_question", "answer_not_found")


def alternatives() -> str:
    """The ways to a better question set, as one sentence (CLI, dashboard and verdict share it)."""
    return ("a stronger model: a local Ollama (`ollama serve`, then RAGKIT_OLLAMA_URL, default "
            "http://127.0.0.1:11434, and RAGKIT_OLLAMA_MODEL; the dashboard picks it up as the default), or an "
            "OpenAI-compatible server (vLLM, llama.cpp server: `--llm openai --llm-model NAME --llm-url "
            "http://HOST:PORT/v1`); or `--method extractive` (no LLM: questions from tables, headings, "
            "definitions and figures, with exact answers)")


def model_notice(method: str, model: str | None) -> str:
    """What will write the questions, said before generating; for the embedded model, what it can do."""
    if method == "extractive":
        return "method extractive: questions from the documents' tables, headings, definitions and figures (no LLM)"
    line = f"model {model or 'unknown'} writes the questions"
    if model == EMBEDDED_MODEL:
        line += (f"; this embedded 135M model keeps about {EMBEDDED_KEEP_RATE:.0%} of the questions asked "
                 f"(measured), mostly junk; for a usable set use {alternatives()}")
    return line


def yield_outcome(asked: int, kept: int, dropped_by_reason: Mapping[str, int], *, method: str = "llm",
                  model: str | None = None) -> dict[str, Any]:
    """{asked, kept, keep_rate, poor, reasons (top three, count each), summary, advice}; ``summary``
    reads "kept 5 of 40 (12%): poor yield" and is what a job's status shows."""
    rate = kept / asked if asked else 0.0
    poor = rate < POOR_KEEP_RATE or kept < MIN_FOR_COMPARISON
    top = sorted(dropped_by_reason.items(), key=lambda item: (-item[1], item[0]))[:3]
    summary = f"kept {kept} of {asked} ({rate:.0%})"
    if poor:
        why = "under half kept" if rate < POOR_KEEP_RATE else f"fewer than {MIN_FOR_COMPARISON} questions"
        summary += f": poor yield ({why})"
        if top:
            summary += "; top drop reasons " + ", ".join(f"{reason} {count}" for reason, count in top)
    return {"asked": asked, "kept": kept, "keep_rate": round(rate, 4), "poor": poor,
            "reasons": dict(top), "summary": summary, "advice": _advice(asked, kept, rate, poor, top, method, model)}


def _advice(asked: int, kept: int, rate: float, poor: bool, top: list[tuple[str, int]], method: str,
            model: str | None) -> str:
    if not poor:
        return ""
    if rate >= POOR_KEEP_RATE:
        more = math.ceil(MIN_FOR_COMPARISON / max(rate, 1e-9))
        return f"ask for more questions (--n {more} would keep about {MIN_FOR_COMPARISON} at this rate)"
    if method == "extractive":
        return ("the documents have few tables, headings, definitions or figures to ask about; add documents, "
                "or generate with an LLM (--method llm)")
    if (top and top[0][0] in _JUNK) or model == EMBEDDED_MODEL:
        return f"the model's replies are mostly unusable; use {alternatives()}"
    return f"read the drops in generation.json; or use {alternatives()}"


def min_kept_failure(outcome: Mapping[str, Any], min_kept: int | None) -> str | None:
    """The one-line reason a run fails ``--min-kept``, or None when it keeps enough."""
    if min_kept is None or outcome["kept"] >= min_kept:
        return None
    return f"kept {outcome['kept']} questions, fewer than --min-kept {min_kept}; {outcome['advice'] or 'ask for more'}"
