"""The quality gate's parameters: thresholds and presets, the LLM verdict's options, the issue set
and the strategy switch map, the scale attempts are ranked on, where the gate sits
(``ragkit.stages.retrieval.quality_gate.stage``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ragkit.retrievers.params import STRATEGIES
from ragkit.stages.base import StageParams
from ragkit.stages.retrieval.quality_gate.attempt_scale import AttemptScale
from ragkit.stages.retrieval.quality_gate.issues import (
    DESIGN_REVISION,
    DESIGN_SWITCH_MAP,
    EARLY_SWITCHES,
    IssueSet,
    issue_names,
)
from ragkit.stages.retrieval.quality_gate.reformulation_rules import Reformulation, ReformulationRules

# The published threshold sets: (min_top_score, min_mean_score, max_spread).
PRESETS = {"basic": (0.5, 0.3, None), "strict": (0.8, 0.7, 0.1)}


class QualityGateParams(StageParams):
    max_retries: int = Field(default=2, ge=1, le=5, description="Most re-retrievals with a reformulated query.")
    score_top_k: int = Field(
        default=5, ge=1, le=100,
        description="The mean of this many top values (on attempt_scale) ranks attempts (and feeds the rule).",
    )
    min_top_score: float = Field(
        default=0.5, ge=-1000.0, le=1000.0,
        description="heuristic: the best chunk must reach at least this on attempt_scale.",
    )
    min_mean_score: float = Field(
        default=0.3, ge=-1000.0, le=1000.0,
        description="heuristic: the mean of the top score_top_k values (on attempt_scale) must reach this.",
    )
    expansion_terms: int = Field(
        default=3, ge=1, le=20, description="heuristic: words from the best chunks added per reformulation."
    )
    max_chunks: int = Field(default=4, ge=1, le=20, description="llm: chunks shown to the model.")
    chunk_chars: int = Field(
        default=250, ge=40, le=4000, description="llm: characters of each chunk shown (small context)."
    )
    max_tokens: int = Field(default=96, ge=16, le=2048, description="llm: most tokens in one reply.")
    verdict: Literal["binary", "scored"] = Field(
        default="binary", description="llm: a yes/no verdict, or a 0-100 score with an issue type and missing aspects."
    )
    pass_score: int = Field(default=60, ge=0, le=100, description="scored: sufficient from this score.")
    preset: Literal["custom", "basic", "strict"] = Field(
        default="custom",
        description="heuristic thresholds: custom (the fields), basic (top 0.5, mean 0.3), "
        "strict (top 0.8, mean 0.7, variance <= 0.1).",
    )
    max_spread: float | None = Field(
        default=None, ge=0.0, le=1000.0,
        description="heuristic: the variance of the top score_top_k values must be at most this (none: no check).",
    )
    switch_strategy: dict[str, str] | Literal["design"] = Field(
        default_factory=dict,
        description="Diagnosed issue -> the retrieval strategy (dense, bm25, hybrid) of the next attempt; "
        "'design': the agentic design's early tier (issue_set: design): off_topic and wrong_domain switch to "
        "bm25, every other issue rewrites the query in the strategy in use.",
    )
    issue_set: IssueSet = Field(
        default="basic",
        description="The issues a failed check is diagnosed as: basic (off_topic, partial, no_coverage...), or "
        "design (missing_key_info, wrong_domain, partial_coverage, too_broad, too_narrow, no_coverage), whose "
        "scored llm verdicts are followed by a query rewrite told what to fix for the issue.",
    )
    position: Literal["before_rerank", "after_rerank"] = Field(
        default="before_rerank",
        description="before_rerank: judge the retrieved chunks; after_rerank: each attempt is reranked first "
        "(by the run's rerank judge) and the gate judges the reranked top chunks.",
    )
    max_attempts: int | None = Field(
        default=None, ge=1, le=5, description="Most attempts, the first included (none: max_retries + 1)."
    )
    web_fallback: bool = Field(default=False, description="Search the web when no attempt passes.")
    attempt_scale: AttemptScale | None = Field(
        default=None,
        description="What ranks attempts and the heuristic thresholds apply to: retriever (the chunks' raw "
        "scores, one scale only within one strategy) or question_overlap (the share of the question's keywords "
        "in each chunk, the same for every strategy). none: question_overlap with switch_strategy, else retriever.",
    )

    reformulation_rules: ReformulationRules = Field(
        default="none",
        description="llm: rules the reformulated query must follow, appended to the verdict prompt: none, or "
        "design (the context-enhancement design's self-RAG verifier rules).",
    )

    reformulation: Reformulation = Field(
        default="keywords",
        description="heuristic: how a failed attempt's query is rewritten: keywords (the question's keywords plus "
        "expansion_terms x round new words of the best attempt's chunks) or design (the context-enhancement "
        "design: the first 5 words when nothing was found, else the query with expansion_terms new words of the "
        "attempt's top chunks appended).",
    )

    design_revision: int = Field(
        default=1, ge=1, le=DESIGN_REVISION,
        description="The revision of the design issue set a gate with issue_set: design uses (set from issue_set, "
        "the latest; part of the run id, so results of an older set are not reused).",
    )

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {"design_revision",
        "verdict", "pass_score", "preset", "max_spread", "switch_strategy", "max_attempts", "web_fallback",
        "attempt_scale", "issue_set", "position", "reformulation_rules", "reformulation"}

    def key_dump(self) -> dict[str, Any]:
        """As every component's, and without ``reformulation_rules`` outside llm mode and
        ``reformulation`` outside heuristic mode, where each changes nothing: a gate written with
        the other mode's option keeps the run id it had without."""
        dumped = super().key_dump()
        if self.mode != "llm":
            dumped.pop("reformulation_rules", None)
        if self.mode != "heuristic":  # the heuristic's rule: an llm gate written with it keeps its id
            dumped.pop("reformulation", None)
        return dumped

    @model_validator(mode="before")
    @classmethod
    def _latest_design_revision(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("issue_set") == "design" and "design_revision" not in value:
            value = {**value, "design_revision": DESIGN_REVISION}
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_scale_when_switching(cls, value: Any) -> Any:
        """A gate that switches strategy compares attempts of different retrievers: it ranks them on
        question_overlap. Written into the params (not left implicit), so the scale is part of such a
        gate's resolved spec, run id and cache keys."""
        if isinstance(value, dict) and value.get("switch_strategy") and value.get("attempt_scale") is None:
            value = {**value, "attempt_scale": "question_overlap"}
        return value

    @model_validator(mode="after")
    def _no_raw_scores_across_strategies(self) -> QualityGateParams:
        if self.switch_strategy and self.attempt_scale == "retriever":
            raise ValueError("attempt_scale 'retriever' cannot rank attempts of different strategies (cosine, BM25 "
                             "and RRF scores differ in scale): use question_overlap with switch_strategy")
        return self

    @model_validator(mode="after")
    def _known_issues_and_strategies(self) -> QualityGateParams:
        names = issue_names(self.issue_set)
        if self.switch_strategy == "design":
            if self.issue_set != "design":
                raise ValueError("switch_strategy 'design' maps the design's issues: set issue_set: design "
                                 "(or give a map of issue -> strategy)")
            return self
        issues = sorted(set(self.switch_strategy) - set(names))
        if issues:
            raise ValueError(f"unknown issue {issues}. Valid issues: {', '.join(names)} (issue_set {self.issue_set})")
        strategies = sorted(set(self.switch_strategy.values()) - set(STRATEGIES))
        if strategies:
            raise ValueError(f"unknown strategy {strategies}. Valid strategies: {', '.join(STRATEGIES)}")
        return self

    @model_validator(mode="after")
    def _design_issues_need_a_scored_verdict(self) -> QualityGateParams:
        if self.issue_set == "design" and self.mode == "llm" and self.verdict != "scored":
            raise ValueError("issue_set 'design' needs verdict: scored in mode llm (a binary verdict names no issue)")
        return self

    def switch_map(self) -> dict[str, str]:
        """Issue -> strategy in effect (empty: the gate never switches)."""
        if self.switch_strategy == "design":
            return {issue: DESIGN_SWITCH_MAP[issue] for issue in EARLY_SWITCHES}
        return dict(self.switch_strategy)

    def thresholds(self) -> tuple[float, float, float | None]:
        """(min_top_score, min_mean_score, max_spread) in effect."""
        if self.preset == "custom":
            return self.min_top_score, self.min_mean_score, self.max_spread
        return PRESETS[self.preset]

    def scale(self) -> str:
        """The scale in effect: retriever unless set (a switching gate has it set by validation)."""
        return self.attempt_scale or "retriever"

    def rounds(self) -> int:
        """Most re-retrievals after the first attempt."""
        return self.max_retries if self.max_attempts is None else self.max_attempts - 1
