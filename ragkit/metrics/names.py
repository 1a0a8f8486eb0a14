"""Every metric name ragkit writes, its family and level, in one place.

A score row's ``metric`` is one of:

- ``<family>@<k>``: a ranking metric over the first k chunks of the final context, e.g.
  ``recall@5``, ``span_ndcg@10``, ``mrr@10``, or a passage metric over their characters
  (``passage_iou@5``).
- ``<family>@<n>tok``: the same family over the first n tokens of the final context in rank
  order (equal-budget comparisons of chunkers), e.g. ``span_recall@512tok``.
- ``mrr`` / ``span_mrr``: over the whole final context (no cut).
- ``final_<what>``: a property of the whole final context passed on to the generator
  (``final_chunks``, ``final_tokens``, ``final_recall``, ...).
- a generation metric (``faithfulness``, ...), or one of those with a judge-repeat suffix.

Nothing here imports a model or LlamaIndex, so the dashboard and the report can use it freely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Families scored at cut-offs k, document level then span level ("span_" + family).
DOC_FAMILIES = ("recall", "precision", "f1", "hit", "ndcg", "map", "mrr")
SPAN_FAMILIES = tuple(f"span_{family}" for family in DOC_FAMILIES)
# Families scored at cut-offs k over the relevant passages' characters (ragkit.metrics.passages).
PASSAGE_FAMILIES = ("passage_recall", "passage_precision", "passage_iou")
# Families also scored at token budgets: what a fixed amount of context holds.
BUDGET_FAMILIES = ("recall", "span_recall")
TOKEN_BUDGETS = (256, 512, 1024, 2048)
# Metrics of the whole final context: its size, and how much of the ground truth it holds.
FINAL_CONTEXT_METRICS = (
    "final_chunks", "final_tokens", "final_recall", "final_precision", "final_span_recall", "final_span_precision",
)
# The semantic retrieval cache (retriever option semantic_cache): per question, the share of its
# searches the cache answered (one search: 1 hit, 0 miss), so a run's mean is its hit rate.
SEMANTIC_CACHE_HIT = "semantic_cache_hit"
# The error of the ``retrieval`` row of a question with no ground truth: written by
# experiments.rows, recognised by analysis.failure_classes (one string, so the two cannot drift).
NOTHING_TO_SCORE = "no relevant documents or answer spans to score against"
# Describe the context (or the run) rather than grade it: no "better" direction, never a factor's
# best level (a cache hit is faster, not better).
DESCRIPTIVE_METRICS = ("final_chunks", "final_tokens", "answer_length", "answer_chars", SEMANTIC_CACHE_HIT)
# Rates in [0, 1] where less is better: a level with the lowest mean is the best, and when levels are
# ranked a failed question counts as 1 (the worst), as it counts 0 for every other metric.
LOWER_IS_BETTER = ("abstention_wrong", "noise_sensitivity")
# Per-question outcomes of the agentic loops (ragkit.metrics.routing, the answer_check judge).
AGENTIC_METRICS = (
    "routing_accuracy", "abstention_correct", "abstention_wrong",
    "answer_relevance", "answer_completeness", "answer_accuracy",
)
# RAGChecker's claim-level diagnostics (ragkit.metrics.claims), shown beside the failure classes.
CLAIM_DIAGNOSTICS = ("context_utilization", "noise_sensitivity")
# Every generation metric a run can score, in reading order: ragas' LLM-judged metrics, ragas'
# non-LLM forms, answer overlap, our embedding score, RAGChecker's claim-level diagnostics
# (ragkit.metrics.generation.METRICS), the pipeline's own groundedness judge.
GENERATION_METRICS = (
    "faithfulness", "answer_relevancy", "context_precision", "context_recall", "nonllm_context_precision",
    "nonllm_context_recall", "answer_overlap", "embedding_groundedness", *CLAIM_DIAGNOSTICS, "groundedness",
    *AGENTIC_METRICS, "answer_length", "answer_chars",
)
# The generation metrics charted and reported by default, when scored.
CHARTED_GENERATION_METRICS = ("faithfulness", "answer_relevancy", "embedding_groundedness", "groundedness",
                              *AGENTIC_METRICS)
# The retrieval metrics a summary, a report and the compare page lead with, when scored.
HEADLINE_METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr", "span_recall@5", "span_recall@10", "span_mrr")

_NAME = re.compile(r"^(?P<family>[a-z0-9_]+?)(?:@(?P<k>\d+)(?P<tok>tok)?)?$")
_ORDER = {family: rank for rank, family in enumerate(DOC_FAMILIES)}


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name: ``family``, and ``k`` (chunks) or ``budget`` (tokens) when cut."""

    family: str
    k: int | None = None
    budget: int | None = None

    @property
    def level(self) -> str:
        """document, span, passage, final, generation or other."""
        if self.family.startswith("final_"):
            return "final"
        if self.family.startswith("span_"):
            return "span"
        if self.family in PASSAGE_FAMILIES:
            return "passage"
        if self.family in DOC_FAMILIES:
            return "document"
        if self.family in GENERATION_METRICS:
            return "generation"
        return "other"

    @property
    def depth_dependent(self) -> bool:
        """Ranking metrics whose value depends on how many chunks the final context holds: cut at
        k, or the uncut mrr / span_mrr (which read the whole list)."""
        return self.budget is None and (self.family in DOC_FAMILIES or self.family in SPAN_FAMILIES
                                        or self.family in PASSAGE_FAMILIES)

    def at_depth(self, depth: int) -> str:
        """This metric cut at ``depth`` chunks (``mrr`` -> ``mrr@depth``)."""
        return f"{self.family}@{depth}"


def parse_metric(name: str) -> MetricName:
    match = _NAME.match(str(name))
    if not match:
        return MetricName(str(name))
    k = int(match["k"]) if match["k"] else None
    return MetricName(match["family"], budget=k, k=None) if match["tok"] else MetricName(match["family"], k=k)


def k_name(family: str, k: int) -> str:
    return f"{family}@{k}"


def budget_name(family: str, tokens: int) -> str:
    return f"{family}@{tokens}tok"


def higher_is_better(name: str) -> bool:
    return better_direction(name) == 1


def better_direction(name: str) -> int:
    """1 when a higher value is better, -1 when a lower one is, 0 for a descriptive metric."""
    family = parse_metric(name).family
    if family in DESCRIPTIVE_METRICS:
        return 0
    return -1 if family in LOWER_IS_BETTER else 1


def failure_value(name: str) -> float:
    """What a failed question counts as in a strict difference (and in a level's mean when rows are
    ordered): the worst value of the metric, 0, or 1 for a lower-is-better rate."""
    return 1.0 if better_direction(name) == -1 else 0.0


def sort_key(name: str) -> tuple:
    """Reading order: document level, span level, passage level, final context, generation, then
    the rest; by family; cut at k before token budgets; by k."""
    parsed = parse_metric(name)
    level = ("document", "span", "passage", "final", "generation", "other").index(parsed.level)
    family = parsed.family.removeprefix("span_")
    if parsed.level == "generation":
        rank = GENERATION_METRICS.index(parsed.family)
    elif parsed.level == "passage":
        rank = PASSAGE_FAMILIES.index(parsed.family)
    else:
        rank = _ORDER.get(family, len(_ORDER))
    cut = 0 if parsed.budget is None else 1
    return (level, rank, family, cut, parsed.k or parsed.budget or 0, name)
