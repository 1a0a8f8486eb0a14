"""Question generation: plan (pure, seeded), call the LLM per planned question, verify, dedup.

``plan_generation`` fixes every passage, answer span and prompt before any call, so a dry run
(``dry_run_counts``) counts exactly the calls the run then makes; only the tokens are estimated.
Every call goes through ``LLMClient`` (cached, recorded) under the stage ``question_generation``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ragkit.llms.calls import LLMClient
from ragkit.questions.dedup import Embed, find_duplicates
from ragkit.questions.generation.outcome import yield_outcome
from ragkit.questions.generation.prompts import (
    PROMPT_VERSION,
    SYSTEM,
    TEMPLATES,
    build_prompt,
    estimate_tokens,
    reply_schema,
)
from ragkit.questions.generation.replies import Verdict, judge_reply
from ragkit.questions.generation.sampling import EXTRACTIVE_TYPES, QUESTION_TYPES, Slot, TextDocument, plan_slots
from ragkit.questions.language import guess_language
from ragkit.questions.wording import normalise_question

STAGE = "question_generation"
RECORD_FORMAT = 1


METHODS = ("llm", "extractive")


class GenerationParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=200, ge=1, le=100_000, description="Questions to plan (drops make the set smaller).")
    method: Literal["llm", "extractive"] = Field(
        default="llm", description="llm: an LLM writes each question; extractive: questions from the documents' "
                                   "tables, headings, definitions and figures, no LLM.")
    types: list[str] = Field(
        default_factory=list, validate_default=True,
        description=f"Question types; llm: any of {', '.join(QUESTION_TYPES)}; extractive: any of "
                    f"{', '.join(EXTRACTIVE_TYPES)}. Empty: all of the method's.")
    seed: int = Field(default=0, ge=0, description="Seed of the sampling of passages and answers.")
    max_paraphrase_overlap: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="A paraphrase question sharing more than this share of its content words with its passage "
                    "is dropped.")
    duplicate_threshold: float = Field(
        default=0.92, ge=0.5, le=1.0, description="Embedding cosine at or above which two questions are duplicates.")
    passage_chars: int = Field(default=900, ge=200, le=8000, description="Longest passage shown to the model.")
    max_answer_words: int = Field(default=12, ge=1, le=60, description="Longest answer phrase, in words.")
    max_tokens: int = Field(default=160, ge=16, le=2048, description="Most tokens of one reply.")

    @field_validator("types")
    @classmethod
    def _known_types(cls, types: list[str], info: ValidationInfo) -> list[str]:
        method = info.data.get("method", "llm")
        valid = EXTRACTIVE_TYPES if method == "extractive" else QUESTION_TYPES
        unknown = [kind for kind in types if kind not in valid]
        if unknown:
            raise ValueError(f"unknown question type(s) {', '.join(unknown)} for method {method}; valid: "
                             f"{', '.join(valid)}")
        return list(dict.fromkeys(types)) or list(valid)


@dataclass(frozen=True)
class PlannedCall:
    slot: Slot
    language: str | None
    prompt: str


@dataclass(frozen=True)
class GeneratedSet:
    rows: list[dict[str, Any]]  # SQuAD-style JSONL rows, with type and generation record
    dropped: list[dict[str, Any]]  # one per planned question not kept: reason, detail
    record: dict[str, Any]  # the set's generation record


def plan_generation(documents: Sequence[TextDocument], params: GenerationParams) -> list[PlannedCall]:
    texts = {d.id_: d.text for d in documents}
    slots = plan_slots(documents, params.n, params.types, params.seed, passage_chars=params.passage_chars,
                       max_answer_words=params.max_answer_words)
    planned = []
    for slot in slots:
        first = slot.passages[0]
        language = guess_language(texts[first.doc_id][first.start:first.end])
        planned.append(PlannedCall(slot, language, build_prompt(slot, texts, language)))
    return planned


def dry_run_counts(planned: Sequence[PlannedCall], params: GenerationParams) -> dict[str, Any]:
    """Calls (exact), prompt tokens (estimated) and the most completion tokens they may use."""
    return {
        "calls": len(planned),
        "by_type": dict(Counter(call.slot.type for call in planned)),
        "prompt_tokens_estimate": sum(estimate_tokens(SYSTEM) + estimate_tokens(call.prompt) for call in planned),
        "completion_tokens_max": len(planned) * params.max_tokens,
    }


def generate_questions(documents: Sequence[TextDocument], params: GenerationParams, client: LLMClient, *,
                       embed: Embed | None = None, corpus: str = "",
                       clock: Callable[[], float] = time.perf_counter,
                       on_call: Callable[[int, int], None] | None = None) -> GeneratedSet:
    """``on_call(done, total)`` follows the calls (a background job's progress file)."""
    started = clock()
    texts = {d.id_: d.text for d in documents}
    planned = plan_generation(documents, params)
    kept: list[tuple[PlannedCall, Verdict, Any]] = []
    dropped: list[dict[str, Any]] = []
    written: list[tuple[Hashable, str]] = []  # every reply's question, kept or not: templates show across both
    usage = Counter[str]()
    for call in planned:
        result = client.call(call.prompt, stage=STAGE, schema=reply_schema(call.slot.type), system=SYSTEM,
                             max_tokens=params.max_tokens, cache_salt=PROMPT_VERSION)
        usage.update(calls=1, backend_calls=int(not result.cache_hit), prompt_tokens=result.prompt_tokens,
                     completion_tokens=result.completion_tokens)
        verdict = judge_reply(call.slot, result.parsed, result.parse_error, texts, call.language,
                              params.max_paraphrase_overlap)
        if verdict.question:
            written.append((call.slot.answers or tuple((p.doc_id, p.start, p.end) for p in call.slot.passages),
                            verdict.question))
        if verdict.reason is None:
            kept.append((call, verdict, result))
        else:
            dropped.append(_dropped(call, verdict.question, verdict.reason, verdict.detail))
        if on_call is not None:
            on_call(len(kept) + len(dropped), len(planned))
    templates = find_templates(written)
    duplicates = find_duplicates([verdict.question for _, verdict, _ in kept], embed, params.duplicate_threshold)
    repeated = {duplicate.index: duplicate for duplicate in duplicates}
    rows = []
    for index, (call, verdict, result) in enumerate(kept):
        template = templates.get(normalise_question(verdict.question))
        if template is not None:
            dropped.append(_dropped(call, verdict.question, "duplicate",
                                    f"a template: the same question was written for {template} different answers "
                                    "or passages, so no copy asks about one of them"))
        elif index in repeated:
            duplicate = repeated[index]
            other = kept[duplicate.of][1].question
            dropped.append(_dropped(call, verdict.question, "duplicate",
                                    f"repeats {other!r} ({duplicate.how}, similarity {duplicate.similarity:.2f})"))
        else:
            rows.append(_row(call, verdict, result))
    identity = client.backend.cache_identity()
    by_reason = dict(Counter(item["reason"] for item in dropped))
    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "corpus": corpus,
        "model": identity,  # backend, model, params and, for Ollama, the digest
        "prompt_version": PROMPT_VERSION,
        "prompts": {"system": SYSTEM, **TEMPLATES},
        "params": params.model_dump(mode="json"),
        "seed": params.seed,
        "method": "llm",
        "asked": params.n,
        "planned": len(planned),
        "kept": len(rows),
        "calls": usage["calls"],
        "backend_calls": usage["backend_calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "seconds": round(clock() - started, 3),
        "duplicates_by": "normalised text and embedding cosine" if embed else "normalised text",
        "dropped_by_reason": by_reason,
        "dropped": dropped,
        "outcome": yield_outcome(params.n, len(rows), by_reason, model=str(identity.get("model"))),
    }
    return GeneratedSet(rows=rows, dropped=dropped, record=record)


def find_templates(written: Sequence[tuple[Hashable, str]]) -> dict[str, int]:
    """Normalised question text -> how many different answers (targets) it was written for, for
    each text written for at least two. A question that stands for several answers is a template
    ("What is the answer to this question?"): every copy goes, the first one too. The same text
    for the same answer is an ordinary duplicate."""
    targets: dict[str, set[Hashable]] = {}
    for target, question in written:
        targets.setdefault(normalise_question(question), set()).add(target)
    return {text: len(found) for text, found in targets.items() if text and len(found) > 1}


def _dropped(call: PlannedCall, question: str, reason: str, detail: str) -> dict[str, Any]:
    return {"slot": call.slot.number, "type": call.slot.type, "doc_id": call.slot.passages[0].doc_id,
            "question": question, "reason": reason, "detail": detail}


def _row(call: PlannedCall, verdict: Verdict, result: Any) -> dict[str, Any]:
    slot = call.slot
    first = slot.passages[0]
    generation = {
        "passages": [{"doc_id": p.doc_id, "section": p.section, "start": p.start, "end": p.end}
                     for p in slot.passages],
        "language": call.language, "word_overlap": round(verdict.overlap, 4), "prompt_version": PROMPT_VERSION,
        "call_key": result.key, "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
    }
    row: dict[str, Any] = {"id": f"q{slot.number + 1:04d}", "question": verdict.question, "doc_id": first.doc_id}
    if not verdict.answers:
        row.update(answer=None, answer_start=None, answer_end=None, answerable=False)
    else:
        head = verdict.answers[0]
        row.update(doc_id=head.doc_id, answer=head.text, answer_start=head.start, answer_end=head.end)
        if len(verdict.answers) > 1:
            row["answer_parts"] = [{"doc_id": a.doc_id, "answer": a.text, "answer_start": a.start,
                                    "answer_end": a.end} for a in verdict.answers]
    return {**row, "type": slot.type, "generation": generation}
