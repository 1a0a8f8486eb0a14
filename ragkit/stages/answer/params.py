"""Each built-in answer stage's parameters and declarations, without LlamaIndex.

The groundedness judge is a LlamaIndex evaluator, and every answer stage reads chunks;
validating a config and planning a grid read only a stage's ``Params``, modes, role and
plan-time rules (does it call the LLM), so these live here, in an *info* class the stage class
subclasses, readable through ``judges.info(name)`` without importing the stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ragkit.stages.answer.answer_prompt import PromptLayout
from ragkit.stages.answer.context_fit import ContextFitMode
from ragkit.stages.answer.retry_strategy import RetryStrategy
from ragkit.stages.base import StageInfo, StageParams


class GeneratorParams(StageParams):
    constrained: bool = Field(
        default=True, description="Ask for JSON {answer, citations}; off: free text, citations read from [n]."
    )
    max_chunks: int = Field(default=5, ge=1, le=50, description="Most chunks shown to the model.")
    chunk_chars: int = Field(default=400, ge=40, le=8000, description="Characters of each chunk shown.")
    max_context_chars: int = Field(
        default=2000, ge=100, le=100_000, description="Characters of all chunks shown together (small context)."
    )
    max_tokens: int = Field(default=200, ge=8, le=4096, description="Most tokens in the answer.")
    system_prompt: str | None = Field(
        default=None, min_length=1, max_length=4000,
        description="The system message; default: answer only from the numbered sources and cite them.",
    )
    abstain_text: str | None = Field(
        default=None, min_length=1, max_length=500,
        description="The answer when no chunk is left to answer from (e.g. none passed the score threshold); "
        "default: ask the model anyway.",
    )
    history_turns: int = Field(default=4, ge=1, le=50, description="Turns of a conversation shown, latest last.")
    turn_chars: int = Field(default=300, ge=20, le=4000, description="Characters of each turn shown.")
    context_fit: ContextFitMode = Field(
        default="fixed", description="fixed: chunk_chars of each chunk, max_context_chars in all; window: whole "
        "chunks first, as many as the model's context window holds beside the prompt and max_tokens (a model "
        "that declares no window, such as the bundled SmolLM2-135M, keeps the fixed limits).",
    )
    temperature: float | None = Field(
        default=None, ge=0.0, le=2.0,
        description="Sampling temperature of the answers; default: the LLM's own (its params, 0 unless set).",
    )

    show_file_name: bool = Field(
        default=False, description="Show each chunk's source file name before its text: (file: notes.txt).")
    context_in: Literal["user", "system"] = Field(
        default="user", description="Where the numbered sources go: the user message (before the question) or "
        "the system message (after the system prompt, as the plain pipeline's design puts its context).")

    prompt_layout: PromptLayout = Field(
        default="plain", description="plain: labelled lines (Sources:, Question:); xml: each part in its own "
        "element (<sources><source id=\"1\">, <question>, <instructions>), as the agentic design writes it.")
    quality_instructions: bool = Field(
        default=False, description="Tell the model how far to trust its sources by the retrieval quality (the "
        "quality gate's, 0-1): above quality_high answer directly, above quality_low say what is not covered, "
        "else say when the sources do not answer; no instruction when the quality is unknown.")
    quality_high: float = Field(
        default=0.8, ge=0.0, le=1.0, description="quality_instructions: a retrieval quality above this is high.")
    quality_low: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="quality_instructions: above this (up to quality_high) is medium; at or below it, low.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "system_prompt", "abstain_text", "history_turns", "turn_chars", "context_fit", "temperature", "show_file_name",
        "context_in", "prompt_layout", "quality_instructions", "quality_high", "quality_low"}

    @model_validator(mode="after")
    def _quality_tiers_in_order(self) -> GeneratorParams:
        if self.quality_low > self.quality_high:
            raise ValueError(f"quality_low ({self.quality_low}) must not be above quality_high ({self.quality_high})")
        return self


class GroundednessParams(StageParams):
    claim_split: Literal["heuristic", "llm"] = Field(
        default="heuristic", description="Split the answer into claims by sentence rule, or ask the LLM."
    )
    max_claims: int = Field(default=8, ge=1, le=50, description="Claims checked per answer; the rest are ignored.")
    min_claim_words: int = Field(default=3, ge=1, le=20, description="Shorter sentences are not claims.")
    context_chars: int = Field(
        default=1500, ge=100, le=100_000, description="Characters of context shown per check (small context)."
    )
    max_tokens: int = Field(default=80, ge=8, le=2048, description="Most tokens in one reply.")
    passing_score: float = Field(
        default=1.0, ge=0.0, le=1.0, description="aevaluate: an answer passes when its score reaches this."
    )
    on_fail: Literal["off", "regenerate", "re_retrieve"] = Field(
        default="off",
        description="Hallucination correction after a check below accept_at: off; regenerate listing the "
        "unsupported claims; or re_retrieve with a refined query first when the score or retrieval is poor.",
    )
    accept_at: float = Field(
        default=0.8, ge=0.0, le=1.0, description="Correction: a supported share this high is kept."
    )
    regenerate_at: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="Correction: at least this supported share regenerates; below it re_retrieve re-retrieves first.",
    )
    min_retrieval_quality: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="Correction: retrieval quality (the quality gate's, 0-1) below this re-retrieves first.",
    )
    max_corrections: int = Field(default=2, ge=1, le=5, description="Correction: most correction rounds.")
    re_retrieve_strategy: RetryStrategy = Field(
        default="same",
        description="Correction: the strategy a re-retrieval searches with: same (the one in use), next (the one "
        "after it: dense -> bm25 -> hybrid -> dense), or a named one (dense, bm25, hybrid).",
    )
    nli_model_path: str | None = Field(
        default=None, description="nli: local folder of an NLI cross-encoder (labels include entailment).")
    entailment_threshold: float = Field(
        default=0.7, ge=0.0, le=1.0, description="nli: a claim is supported when P(entailment) exceeds this.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "on_fail", "accept_at", "regenerate_at", "min_retrieval_quality", "max_corrections", "nli_model_path",
        "entailment_threshold", "re_retrieve_strategy"}

    @model_validator(mode="after")
    def _tiers_in_order(self) -> GroundednessParams:
        if self.regenerate_at > self.accept_at:
            raise ValueError(f"regenerate_at ({self.regenerate_at}) must not exceed accept_at ({self.accept_at})")
        if self.mode == "nli" and not self.nli_model_path:
            raise ValueError("mode nli needs nli_model_path: a local folder of an NLI cross-encoder")
        return self


# The issue a failed answer has: the aspect graded lowest (ties: this order).
ANSWER_ISSUES = {"relevance": "off_topic", "completeness": "incomplete", "accuracy": "unsupported"}
RetryAction = Literal["regenerate", "re_retrieve"]


def default_issue_actions() -> dict[str, RetryAction]:
    """Missing content is searched for again; an off-topic or unsupported answer is rewritten from
    the same chunks (told not to repeat what it said)."""
    return {"off_topic": "regenerate", "incomplete": "re_retrieve", "unsupported": "regenerate"}


class AnswerCheckParams(StageParams):
    context_chars: int = Field(default=1500, ge=100, le=100_000, description="Characters of context shown.")
    answer_chars: int = Field(default=800, ge=50, le=20_000, description="Characters of the answer shown.")
    max_tokens: int = Field(default=80, ge=16, le=2048, description="Most tokens in one reply.")
    retry: bool = Field(
        default=False, description="Late tier: a failed check retries the answer (re-retrieve or regenerate by "
        "its issue); off: the check only scores.")
    pass_scores: list[int] = Field(
        default_factory=lambda: [65, 50], min_length=1, max_length=6,
        description="retry: the gate score (0-100) an answer needs, per attempt (first, first retry, ...; the "
        "last repeats): the design's adaptive thresholds 65, then 50.")
    gate_score: Literal["min", "mean"] = Field(
        default="min", description="retry: the gate score is the lowest of the three grades, or their mean.")
    max_retries: int = Field(default=1, ge=1, le=3, description="retry: most retried answers after the first "
                             "(the design: 2, three attempts in all).")
    issue_actions: dict[str, RetryAction] = Field(
        default_factory=default_issue_actions,
        description="retry: issue (off_topic, incomplete, unsupported) -> regenerate or re_retrieve.")
    retry_strategy: RetryStrategy = Field(
        default="same", description="retry: the strategy a re-retrieval searches with: same, next (dense -> bm25 "
        "-> hybrid -> dense) or a named one (dense, bm25, hybrid).")
    pass_by: Literal["attempt", "retrieval"] = Field(
        default="attempt",
        description="retry: which of pass_scores an answer needs: by attempt (the first, then the next...), or by "
        "retrieval quality (the quality gate's, 0-1): the first at or above good_retrieval_at (or unknown), the "
        "second below it (the design's 65 / 50).")
    good_retrieval_at: float = Field(
        default=0.6, ge=0.0, le=1.0, description="retry, pass_by retrieval: retrieval quality this high is good.")
    issue_set: Literal["basic", "design"] = Field(
        default="basic",
        description="retry: basic (the lowest grade names the issue: off_topic, incomplete, unsupported; "
        "issue_actions acts on it) or design (the grader names one of the agentic design's issues; every failed "
        "answer re-retrieves with the strategy the design's map gives the issue, in the strategy in use otherwise).")
    re_retrieve_via: Literal["retriever", "pipeline"] = Field(
        default="retriever",
        description="retry: a re-retrieval searches the retriever once, or goes back through the pipeline's "
        "retrieval (query expansion, the quality gate and its retries), as the design's late tier does.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "retry", "pass_scores", "gate_score", "max_retries", "issue_actions", "retry_strategy", "pass_by",
        "good_retrieval_at", "issue_set", "re_retrieve_via"}

    @field_validator("pass_scores")
    @classmethod
    def _scores_in_range(cls, value: list[int]) -> list[int]:
        wrong = [score for score in value if not 0 <= score <= 100]
        if wrong:
            raise ValueError(f"pass_scores {wrong} out of range: each is a score from 0 to 100")
        return value

    @field_validator("issue_actions")
    @classmethod
    def _known_issues(cls, value: dict[str, RetryAction]) -> dict[str, RetryAction]:
        unknown = sorted(set(value) - set(ANSWER_ISSUES.values()))
        if unknown:
            raise ValueError(f"unknown answer issue {unknown}. Valid issues: {', '.join(ANSWER_ISSUES.values())}")
        return {**default_issue_actions(), **value}

    def threshold(self, attempt: int, retrieval_quality: float | None = None) -> int:
        """The pass score of attempt ``attempt`` (0: the first answer); with ``pass_by: retrieval``, of
        an answer from a retrieval of this quality (unknown counts as good)."""
        if self.pass_by == "retrieval":
            poor = retrieval_quality is not None and retrieval_quality < self.good_retrieval_at
            return self.pass_scores[min(int(poor), len(self.pass_scores) - 1)]
        return self.pass_scores[min(attempt, len(self.pass_scores) - 1)]


class GeneratorInfo(StageInfo):
    """What ``Generator`` declares; it subclasses this."""

    name: ClassVar[str] = "generator"
    role: ClassVar[str] = "generate"
    # quality: the retrieval quality, for quality_instructions (a generator that does not declare
    # it is not given one).
    inputs: ClassVar[tuple[str, ...]] = ("question", "history", "nodes", "quality")
    Params: ClassVar[type[GeneratorParams]] = GeneratorParams
    modes: ClassVar[tuple[str, ...]] = ("llm",)


class GroundednessJudgeInfo(StageInfo):
    """What ``GroundednessJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "groundedness"
    role: ClassVar[str] = "verify"
    Params: ClassVar[type[GroundednessParams]] = GroundednessParams
    modes: ClassVar[tuple[str, ...]] = ("off", "llm", "nli")

    @classmethod
    def calls_llm(cls, params: Mapping[str, Any]) -> bool:
        """Mode llm, or mode nli whose claims the LLM splits."""
        return super().calls_llm(params) or (params.get("mode") == "nli" and params.get("claim_split") == "llm")

    @classmethod
    def llm_calls_per_question(cls, params: Mapping[str, Any]) -> int:
        """One call per claim checked in llm mode (max_claims at most), plus the split with
        ``claim_split: llm``; in nli mode only that split. Correction rounds are not counted."""
        split = 1 if params.get("claim_split") == "llm" else 0
        if params.get("mode") != "llm":
            return split
        return split + int(params.get("max_claims", GroundednessParams.model_fields["max_claims"].default))


class AnswerCheckJudgeInfo(StageInfo):
    """What ``AnswerCheckJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "answer_check"
    role: ClassVar[str] = "check"
    Params: ClassVar[type[AnswerCheckParams]] = AnswerCheckParams
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")
