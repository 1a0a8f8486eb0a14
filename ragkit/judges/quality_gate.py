"""Quality gate (self-RAG): judge whether the retrieved chunks suffice; if not, reformulate and retry.

Each round assesses the latest attempt. ``heuristic`` mode calls an attempt sufficient when its
top value reaches ``min_top_score`` and the mean of its top ``score_top_k`` values reaches
``min_mean_score``; its reformulation is the question's keywords plus the most frequent new
words of the best attempt's top chunks (pseudo-relevance feedback). ``llm`` mode asks the model
for ``{sufficient, reformulated_query, reason}``. Rounds stop when an attempt is sufficient,
when no new query comes up, or after ``max_retries`` re-retrievals.

The gate then returns the best attempt: the highest mean of the top ``score_top_k`` values
(an empty attempt scores -inf), the earliest attempt on a tie, so the original retrieval wins
unless a retry did strictly better. A verdict that cannot be parsed falls back to the original
retrieval, the judge-off behaviour.

Values are on one scale for every attempt (``attempt_scale``, see ``ragkit.judges.attempt_scale``):
the chunks' retriever scores while every attempt uses one strategy, and the share of the
question's keywords each chunk contains (``question_overlap``) for a gate that switches strategy,
whose attempts would otherwise compare cosines with BM25 sums and RRF fusions. The thresholds
apply to the same values.

Options added with the agentic loops (each off by default, leaving the above unchanged):

- ``verdict: scored`` (llm): the model scores the chunks 0-100 (sufficient at ``pass_score``,
  60), names one issue from ``ISSUE_TYPES`` and lists the missing aspects; every attempt is
  scored, the last one too, and the best attempt is the highest score (ties: the scale's rule).
- ``preset``: the published heuristic thresholds, ``basic`` (top 0.5, mean 0.3: the defaults) and
  ``strict`` (top 0.8, mean 0.7, score variance at most 0.1); ``max_spread`` is the variance check
  on its own. The heuristic diagnoses its failures: low top score -> no_coverage, low mean ->
  partial, high variance -> too_broad.
- ``switch_strategy``: issue -> strategy. A failed check whose issue is mapped to a strategy
  other than the current one (at first the one the pipeline retrieved with) switches to it
  (through the ``switch`` callable the pipeline gives) and retrieves again; query transforms
  inside ``retrieve`` then regenerate their expansions for the new strategy. An issue mapped to
  the current strategy retries with a new query instead. Such a gate ranks attempts on
  ``question_overlap``. ``max_attempts`` caps the attempts, the first included.
- ``web_fallback``: recorded for the pipeline, which searches the web when the gate failed.

After ``run``, ``outcome`` says whether an attempt passed, the retrieval quality in [0, 1] (the
kept attempt's score / 100, or its value on the scale, clipped, for the heuristic; unknown for
binary llm verdicts), the issue and missing aspects, and the kept attempt's strategy.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, Field, field_validator, model_validator

from ragkit.errors import LLMError
from ragkit.judges.attempt_scale import (
    SCALE_LABELS,
    Attempt,
    AttemptScale,
    best_attempt,
    best_scored_attempt,
    mean_top,
    mean_top_score,
    scale_values,
    top_variance,
)
from ragkit.judges.base import Judge, JudgeParams, JudgeTrace
from ragkit.judges.keywords import keywords
from ragkit.judges.quality_gate_prompts import (
    ISSUE_TYPES,
    NO_ISSUE,
    SYSTEM,
    GateVerdict,
    ScoredVerdict,
    build_prompt,
    build_scored_prompt,
)
from ragkit.retrievers.switchable import STRATEGIES

Retrieve = Callable[[str], list[NodeWithScore]]
Switch = Callable[[str], None]

# The published threshold sets: (min_top_score, min_mean_score, max_spread).
PRESETS = {"basic": (0.5, 0.3, None), "strict": (0.8, 0.7, 0.1)}


class QualityGateParams(JudgeParams):
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
    switch_strategy: dict[str, str] = Field(
        default_factory=dict,
        description="Diagnosed issue -> the retrieval strategy (dense, bm25, hybrid) of the next attempt.",
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

    added_fields: ClassVar[frozenset[str]] = JudgeParams.added_fields | {
        "verdict", "pass_score", "preset", "max_spread", "switch_strategy", "max_attempts", "web_fallback",
        "attempt_scale"}

    @model_validator(mode="before")
    @classmethod
    def _one_scale_when_switching(cls, value: Any) -> Any:
        """A gate that switches strategy compares attempts of different retrievers: it ranks them on
        question_overlap. Written into the params (not left implicit), so such a gate's resolved spec,
        run id and cached results differ from those of the gate that ranked raw scores before."""
        if isinstance(value, dict) and value.get("switch_strategy") and value.get("attempt_scale") is None:
            value = {**value, "attempt_scale": "question_overlap"}
        return value

    @model_validator(mode="after")
    def _no_raw_scores_across_strategies(self) -> QualityGateParams:
        if self.switch_strategy and self.attempt_scale == "retriever":
            raise ValueError("attempt_scale 'retriever' cannot rank attempts of different strategies (cosine, BM25 "
                             "and RRF scores differ in scale): use question_overlap with switch_strategy")
        return self

    @field_validator("switch_strategy")
    @classmethod
    def _known_issues_and_strategies(cls, value: dict[str, str]) -> dict[str, str]:
        issues = sorted(set(value) - set(ISSUE_TYPES))
        if issues:
            raise ValueError(f"unknown issue {issues}. Valid issues: {', '.join(ISSUE_TYPES)}")
        strategies = sorted(set(value.values()) - set(STRATEGIES))
        if strategies:
            raise ValueError(f"unknown strategy {strategies}. Valid strategies: {', '.join(STRATEGIES)}")
        return value

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


@dataclass
class GateOutcome:
    """What the gate concluded, for the pipeline's later steps (web fallback, correction tiers)."""

    passed: bool | None = None  # None: off, or no usable verdict
    quality: float | None = None  # 0-1 retrieval quality of the kept attempt, when the mode gives one
    issue: str | None = None
    missing_aspects: list[str] = field(default_factory=list)
    strategy: str | None = None  # the kept attempt's strategy; None: the run's own


def _normal(query: str) -> str:
    return " ".join(query.lower().split())


class QualityGate(Judge):
    name: ClassVar[str] = "quality_gate"
    Params: ClassVar[type[QualityGateParams]] = QualityGateParams
    params: QualityGateParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")

    def __init__(self, params: QualityGateParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    outcome: GateOutcome = GateOutcome()

    def run(self, query: str, retrieve: Retrieve, trace: JudgeTrace,
            switch: Switch | None = None, strategy: str | None = None) -> list[NodeWithScore]:
        """The chunks of the best attempt; exactly ``retrieve(query)`` when off or on an unusable verdict.

        ``switch(strategy)`` changes the strategy of the next ``retrieve`` calls (``switch_strategy``);
        ``strategy`` is the one ``retrieve`` uses now (the run's retriever, or the strategy judge's
        choice), so an issue mapped to it is no switch: the gate retries with a new query instead
        of repeating the same search."""
        self.outcome = GateOutcome()
        first = retrieve(query)
        if not self.enabled:
            return first
        attempts = [self._attempt(query, query, first, strategy)]
        current = strategy
        tried: set[tuple[str, str | None]] = {(_normal(query), current)}
        stopped = "max_retries"
        rounds = self.params.rounds()
        for round_number in range(1, rounds + 2):
            latest = attempts[-1]
            if round_number > rounds:
                # Every attempt gets a verdict when attempts are ranked by it (scored) or it can
                # switch strategy; otherwise, as always, the last retry is not judged.
                if not self._judges_last_attempt():
                    break
                if not self._assess(query, latest, attempts, round_number, trace, final=True):
                    return first
                break
            assessed = self._assess(query, latest, attempts, round_number, trace)
            if not assessed:
                return first
            decision = trace.judgements[-1].decision
            new_query = decision["reformulated_query"]
            target = self.params.switch_strategy.get(latest.issue or "") if switch is not None else None
            if latest.sufficient:
                stopped = "sufficient"
            elif switch is not None and target is not None and target != current:
                current = target
                switch(target)
                next_query = new_query if new_query and (_normal(new_query), current) not in tried else latest.query
                tried.add((_normal(next_query), current))
                nodes = retrieve(next_query)
                attempts.append(self._attempt(query, next_query, nodes, current))
                decision.update(action="switch", strategy=current, retry_query=next_query,
                                retry_mean_score=_finite(attempts[-1].mean_score),
                                **self._scale_fields(attempts[-1], "retry_"))
            elif not new_query or (_normal(new_query), current) in tried:
                stopped = "no new query"
            else:
                tried.add((_normal(new_query), current))
                nodes = retrieve(new_query)
                attempts.append(self._attempt(query, new_query, nodes, current))
                decision.update(action="retry", retry_mean_score=_finite(attempts[-1].mean_score),
                                **self._scale_fields(attempts[-1], "retry_"))
            if decision.get("action") not in ("retry", "switch"):
                break

        scored = self.params.mode == "llm" and self.params.verdict == "scored"
        chosen = best_scored_attempt(attempts) if scored else best_attempt(attempts)
        kept = attempts[chosen]
        trace.judgements[-1].decision.update(
            stopped=stopped, chosen_attempt=chosen, chosen_query=kept.query,
            attempts=[self._attempt_record(a) for a in attempts],
            kept=[node.node.node_id for node in kept.nodes],
        )
        self.outcome = self._outcome(attempts, kept)
        return kept.nodes

    def _attempt(self, question: str, query: str, nodes: list[NodeWithScore], strategy: str | None) -> Attempt:
        """An attempt valued on the gate's scale (``ragkit.judges.attempt_scale``), always against
        the original ``question``, whatever query retrieved it."""
        k = self.params.score_top_k
        values = scale_values(self.params.scale(), question, nodes)
        return Attempt(query, nodes, mean_top_score(nodes, k), values=values, scale_score=mean_top(values, k),
                       strategy=strategy)

    def _scale_fields(self, attempt: Attempt, prefix: str = "") -> dict[str, float | None]:
        """The attempt's value on a scale other than the raw scores (already recorded as mean_score)."""
        scale = self.params.scale()
        return {} if scale == "retriever" else {f"{prefix}{scale}": _finite(attempt.scale_score)}

    def _judges_last_attempt(self) -> bool:
        return (self.params.mode == "llm" and self.params.verdict == "scored") or bool(self.params.switch_strategy)

    def _attempt_record(self, attempt: Attempt) -> dict[str, Any]:
        record: dict[str, Any] = {"query": attempt.query, "mean_score": _finite(attempt.mean_score),
                                  **self._scale_fields(attempt)}
        if self._judges_last_attempt() or attempt.strategy is not None:
            record.update(strategy=attempt.strategy, score=attempt.verdict_score, issue=attempt.issue,
                          sufficient=attempt.sufficient)
        return record

    def _outcome(self, attempts: list[Attempt], kept: Attempt) -> GateOutcome:
        passed = any(attempt.sufficient for attempt in attempts)
        if self.params.mode == "heuristic":
            quality = None if kept.scale_score == float("-inf") else min(max(kept.scale_score, 0.0), 1.0)
        else:
            quality = None if kept.verdict_score is None else kept.verdict_score / 100
        return GateOutcome(passed=passed, quality=quality, issue=kept.issue,
                           missing_aspects=list(kept.missing_aspects), strategy=kept.strategy)

    def _assess(self, query: str, latest: Attempt, attempts: list[Attempt], round_number: int,
                trace: JudgeTrace, final: bool = False) -> bool:
        """Judge ``latest`` and record the round; False when the verdict is unusable (recorded as
        a fallback, and the caller returns the first retrieval)."""
        started = time.perf_counter()
        summary = f"round {round_number}: {latest.query} | {len(latest.nodes)} chunks"
        decision: dict[str, Any] = {"round": round_number, "query": latest.query,
                                    "mean_score": _finite(latest.mean_score), **self._scale_fields(latest)}
        if latest.strategy is not None:
            decision["strategy"] = latest.strategy
        if final:
            decision["action"] = "final check"
        result = None
        if self.params.mode == "heuristic":
            sufficient, new_query, reason, issue = self._heuristic_verdict(query, latest, attempts)
        else:
            tried = [attempt.query for attempt in attempts[1:]]
            scored = self.params.verdict == "scored"
            build = build_scored_prompt if scored else build_prompt
            prompt = build(query, latest.nodes[: self.params.max_chunks], self.params.chunk_chars, tried)
            schema: type[BaseModel] = ScoredVerdict if scored else GateVerdict
            try:
                result = self.ask(prompt, schema, system=SYSTEM, max_tokens=self.params.max_tokens)
            except LLMError as error:
                trace.add(self.judgement(summary, {**decision, "action": "fell back"}, started=started,
                                         fell_back=True, error=str(error)))
                return False
            if result.parsed is None:
                trace.add(self.judgement(summary, {**decision, "action": "fell back"}, result,
                                         started=started, fell_back=True))
                return False
            verdict = result.parsed
            assert isinstance(verdict, (ScoredVerdict, GateVerdict))  # the schema asked for
            new_query = " ".join(verdict.reformulated_query.split())
            reason = verdict.reason
            if isinstance(verdict, ScoredVerdict):
                sufficient = verdict.score >= self.params.pass_score
                issue = None if verdict.issue == NO_ISSUE else verdict.issue
                latest.verdict_score = verdict.score
                latest.missing_aspects = [" ".join(a.split()) for a in verdict.missing_aspects if a.strip()]
                decision.update(score=verdict.score, issue=verdict.issue, missing_aspects=latest.missing_aspects)
            else:
                sufficient, issue = verdict.sufficient, None
        latest.sufficient, latest.issue = sufficient, issue
        decision.update(sufficient=sufficient, reformulated_query=new_query, reason=reason)
        if issue is not None and self.params.mode == "heuristic" and self._judges_last_attempt():
            decision["issue"] = issue
        trace.add(self.judgement(summary, decision, result, started=started))
        return True

    def _heuristic_verdict(self, query: str, latest: Attempt,
                           attempts: list[Attempt]) -> tuple[bool, str, str, str | None]:
        # The thresholds apply on the gate's scale: raw scores, or question overlap when switching.
        values, label = latest.values, SCALE_LABELS[self.params.scale()]
        min_top, min_mean, max_spread = self.params.thresholds()
        top = max(values, default=float("-inf"))
        problems: list[tuple[str, str]] = []
        if top < min_top:
            problems.append(("no_coverage", f"top {label} {_finite(top)} < {min_top}"))
        if latest.scale_score < min_mean:
            problems.append(("partial", f"mean top-{self.params.score_top_k} {label} {_finite(latest.scale_score)} "
                                        f"< {min_mean}"))
        if max_spread is not None:
            spread = top_variance(values, self.params.score_top_k)
            if spread > max_spread:
                problems.append(("too_broad", f"{label} variance {round(spread, 6)} > {max_spread}"))
        if not problems:
            passed = f"{label}s pass both thresholds" if max_spread is None else f"{label}s pass every check"
            return True, "", passed, None
        return (False, self._expanded_query(query, attempts, len(attempts)), "; ".join(p for _, p in problems),
                problems[0][0])

    def _expanded_query(self, query: str, attempts: list[Attempt], round_number: int) -> str:
        """The question's keywords plus ``expansion_terms`` x round frequent new words of the best chunks."""
        base = keywords(query)
        best = attempts[best_attempt(attempts)].nodes[: self.params.score_top_k]
        counts = Counter(word for node in best for word in keywords(node.node.get_content())
                         if word not in base and len(word) > 2)
        extra = [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
        return " ".join(base + extra[: self.params.expansion_terms * round_number])


def _finite(value: float) -> float | None:
    """JSON-safe score: None instead of -inf (an empty attempt)."""
    return None if value == float("-inf") else round(value, 6)
