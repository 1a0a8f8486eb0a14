"""How the quality gate values and judges an attempt without an LLM: its values on the gate's
scale, the heuristic verdict (thresholds, with a diagnosis), the pseudo-relevance-feedback
reformulation, and the outcome the pipeline reads (``ragkit.stages.retrieval.quality_gate.stage``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragkit.stages.retrieval.quality_gate.attempt_scale import (
    SCALE_LABELS,
    SearchAttempt,
    best_attempt,
    mean_top,
    mean_top_score,
    scale_values,
    top_variance,
)
from ragkit.stages.retrieval.quality_gate.params import QualityGateParams
from ragkit.stages.retrieval.quality_gate.reformulation_rules import design_reformulation
from ragkit.text import keywords

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore


@dataclass
class GateOutcome:
    """What the gate concluded, for the pipeline's later steps (web fallback, correction tiers)."""

    passed: bool | None = None  # None: off, or no usable verdict
    quality: float | None = None  # 0-1 retrieval quality of the kept attempt, when the mode gives one
    issue: str | None = None
    missing_aspects: list[str] = field(default_factory=list)
    strategy: str | None = None  # the kept attempt's strategy; None: the run's own


def attempt(params: QualityGateParams, question: str, query: str, nodes: list[NodeWithScore],
            strategy: str | None) -> SearchAttempt:
    """An attempt valued on the gate's scale (``ragkit.stages.retrieval.quality_gate.attempt_scale``), always
    against the original ``question``, whatever query retrieved it."""
    k = params.score_top_k
    values = scale_values(params.scale(), question, nodes)
    return SearchAttempt(query, nodes, mean_top_score(nodes, k), values=values, scale_score=mean_top(values, k),
                   strategy=strategy)


def scale_fields(params: QualityGateParams, attempt: SearchAttempt, prefix: str = "") -> dict[str, float | None]:
    """The attempt's value on a scale other than the raw scores (already recorded as mean_score)."""
    scale = params.scale()
    return {} if scale == "retriever" else {f"{prefix}{scale}": finite(attempt.scale_score)}


def outcome(params: QualityGateParams, attempts: list[SearchAttempt], kept: SearchAttempt) -> GateOutcome:
    passed = any(attempt.sufficient for attempt in attempts)
    if params.mode == "heuristic":
        quality = None if kept.scale_score == float("-inf") else min(max(kept.scale_score, 0.0), 1.0)
    else:
        quality = None if kept.verdict_score is None else kept.verdict_score / 100
    return GateOutcome(passed=passed, quality=quality, issue=kept.issue,
                       missing_aspects=list(kept.missing_aspects), strategy=kept.strategy)


def heuristic_verdict(params: QualityGateParams, query: str, latest: SearchAttempt,
                      attempts: list[SearchAttempt]) -> tuple[bool, str, str, str | None]:
    """(sufficient, reformulated query, reason, issue) by the thresholds in effect."""
    # The thresholds apply on the gate's scale: raw scores, or question overlap when switching.
    values, label = latest.values, SCALE_LABELS[params.scale()]
    min_top, min_mean, max_spread = params.thresholds()
    top = max(values, default=float("-inf"))
    problems: list[tuple[str, str]] = []
    if top < min_top:
        problems.append(("no_coverage", f"top {label} {finite(top)} < {min_top}"))
    if latest.scale_score < min_mean:
        problems.append(("partial", f"mean top-{params.score_top_k} {label} {finite(latest.scale_score)} "
                                    f"< {min_mean}"))
    if max_spread is not None:
        spread = top_variance(values, params.score_top_k)
        if spread > max_spread:
            problems.append(("too_broad", f"{label} variance {round(spread, 6)} > {max_spread}"))
    if not problems:
        passed = f"{label}s pass both thresholds" if max_spread is None else f"{label}s pass every check"
        return True, "", passed, None
    new_query = design_reformulation(query, latest.nodes, params.expansion_terms, params.score_top_k) \
        if params.reformulation == "design" else expanded_query(params, query, attempts, len(attempts))
    return (False, new_query, "; ".join(p for _, p in problems),
            problems[0][0])


def expanded_query(params: QualityGateParams, query: str, attempts: list[SearchAttempt], round_number: int) -> str:
    """The question's keywords plus ``expansion_terms`` x round frequent new words of the best chunks."""
    base = keywords(query)
    best = attempts[best_attempt(attempts)].nodes[: params.score_top_k]
    counts = Counter(word for node in best for word in keywords(node.node.get_content())
                     if word not in base and len(word) > 2)
    extra = [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return " ".join(base + extra[: params.expansion_terms * round_number])


def finite(value: float) -> float | None:
    """JSON-safe score: None instead of -inf (an empty attempt)."""
    return None if value == float("-inf") else round(value, 6)


def record(params: QualityGateParams, attempt: SearchAttempt, judged_last: bool) -> dict[str, Any]:
    """An attempt as the gate's decision lists it."""
    fields: dict[str, Any] = {"query": attempt.query, "mean_score": finite(attempt.mean_score),
                              **scale_fields(params, attempt)}
    if judged_last or attempt.strategy is not None:
        fields.update(strategy=attempt.strategy, score=attempt.verdict_score, issue=attempt.issue,
                      sufficient=attempt.sufficient)
    return fields
