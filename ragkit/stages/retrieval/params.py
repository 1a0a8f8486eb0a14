"""Each built-in retrieval stage's parameters and declarations, without LlamaIndex.

The retrieval stages read and re-retrieve chunks; validating a config and planning a grid read
only a stage's ``Params``, modes, role and plan-time rules (how many chunks it passes on), so
these live here, in an *info* class the stage class subclasses, readable through
``judges.info(name)`` without importing the stage. The quality gate's own params model is in
``quality_gate_params`` (it is large), which imports no LlamaIndex either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, cast

from pydantic import Field, model_validator

from ragkit.stages.base import StageInfo, StageParams
from ragkit.stages.retrieval.quality_gate.params import QualityGateParams


class RetrievalJudgeParams(StageParams):
    max_iterations: int = Field(
        default=2, ge=1, le=5,
        description="Most judging rounds; a round after the first runs only when the model asks for more chunks.",
    )
    keep_unjudged: bool = Field(
        default=False, description="After the relevant chunks, append the rest (True) or drop them (False)."
    )
    max_chunks: int = Field(
        default=8, ge=1, le=50, description="Most chunks shown to the model per round; the rest count as unjudged."
    )
    chunk_chars: int = Field(
        default=300, ge=40, le=4000, description="Characters of each chunk shown to the model (small context)."
    )
    max_tokens: int = Field(default=160, ge=16, le=2048, description="Most tokens in one reply.")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Relevance filter: the model rates each chunk 0-1 and a relevant chunk rated below this "
        "is dropped (none: no ratings asked).",
    )

    show_file_name: bool = Field(
        default=False, description="Show each chunk's source file name before its preview: (file: notes.txt).")
    none_relevant: Literal["drop_all", "keep_all"] = Field(
        default="drop_all",
        description="When the model calls no chunk relevant: drop_all (an empty context) or keep_all (every "
        "chunk stays, as if unjudged: the Retrieval Judge design's rule).")

    loop: Literal["judge", "evaluate_refine"] = Field(
        default="judge",
        description="judge: one call per round keeps, orders and may ask for more with a refined query; "
        "evaluate_refine: the judges design's phase 4 loop, an evaluation call (relevant chunks, enough?) and, "
        "when not enough, a separate refine call for a new query that is searched, up to max_iterations "
        "evaluations of max_chunks chunks each (ragkit.stages.retrieval.refine_loop).")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "min_relevance", "show_file_name", "none_relevant", "loop"}

    @model_validator(mode="after")
    def _loop_without_ratings(self) -> RetrievalJudgeParams:
        if self.loop == "evaluate_refine" and self.min_relevance is not None:
            raise ValueError("min_relevance (ratings) applies to loop 'judge' only, not to 'evaluate_refine'")
        return self


class RetrievalJudgeInfo(StageInfo):
    """What ``RetrievalJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "retrieval"
    role: ClassVar[str] = "refine"
    Params: ClassVar[type[RetrievalJudgeParams]] = RetrievalJudgeParams
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")

    @classmethod
    def key_version(cls, params: Mapping[str, Any]) -> int:
        """The evaluate -> refine loop keys version 2: a refined query that repeats a searched one ends
        the loop (version 1 searched it again), which changes its results, so its runs have their own
        ids; the one-call judge behaves as at version 1 and keeps its ids and cached results."""
        return 2 if params.get("loop") == "evaluate_refine" else cls.version

    @classmethod
    def llm_calls_per_question(cls, params: Mapping[str, Any]) -> int:
        """The evaluate -> refine loop at its bound: max_iterations evaluations and a refine call
        between each two (2 x max_iterations - 1); the one-call judge one (a second round only when
        the model asks for more chunks)."""
        if params.get("loop") != "evaluate_refine":
            return 1
        iterations = params.get("max_iterations", RetrievalJudgeParams.model_fields["max_iterations"].default)
        return 2 * int(iterations) - 1

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        own = cast(RetrievalJudgeParams, params)  # final_depth checked it is cls.Params
        # Each round but the last may add one base retrieval (top_k chunks) to the pool; the model
        # keeps chunks from the max_chunks shown; keep_unjudged appends the rest of the pool, and
        # none_relevant keep_all keeps the whole pool when none is relevant.
        pool = depth + (own.max_iterations - 1) * top_k
        if own.loop == "evaluate_refine":
            # Each evaluation keeps chunks of the max_chunks it is shown; keep_unjudged adds the rest of the pool.
            shown = min(depth, own.max_chunks) + (own.max_iterations - 1) * min(top_k, own.max_chunks)
            return pool if own.keep_unjudged else shown
        return pool if own.keep_unjudged or own.none_relevant == "keep_all" else min(pool, own.max_chunks)


class QualityGateInfo(StageInfo):
    """What ``QualityGate`` declares; it subclasses this."""

    name: ClassVar[str] = "quality_gate"
    role: ClassVar[str] = "gate"
    Params: ClassVar[type[QualityGateParams]] = QualityGateParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")
