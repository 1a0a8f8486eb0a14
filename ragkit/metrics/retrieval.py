"""Retrieval metrics for one question: what a run records, assembled from the metric modules.

The exact rules live beside the functions:

- ``ragkit.metrics.documents``: recall, precision, f1, hit, ndcg, map, mrr at k, and mrr, over
  the documents of the first k *chunks* (k chunks, not k documents).
- ``ragkit.metrics.spans``: the same families over answer spans (``span_*``); alternative spans
  of one answer part are any-of, the parts of a multi-part answer are all-of.
- ``ragkit.metrics.passages``: precision, recall and IoU of the first k chunks' characters
  against the relevant passages (``passage_*``, Chroma's token-level chunking evaluation).
- ``ragkit.metrics.budget``: recall and span_recall within the first n tokens (``@{n}tok``).
- ``ragkit.metrics.final_context``: size and ground-truth coverage of the whole final context.

The ranking is the final context: the chunks after every judge, in rank order. An empty ranking
is a real failure to retrieve and scores 0 on every metric. A level the question has no ground
truth for (no relevant document, no answer span) is left out, not zeroed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ragkit.metrics.budget import budget_cut, budget_metrics
from ragkit.metrics.documents import (
    DOC_AT_K,
    average_precision_at_k,
    doc_metrics,
    doc_ranking_at_k,
    f1_at_k,
    has_relevant,
    hit_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    reciprocal_rank_at_k,
)
from ragkit.metrics.final_context import FinalContext, final_context_metrics
from ragkit.metrics.passages import Passage, passage_metrics
from ragkit.metrics.ranking import RetrievedSpan, check_k, scores_at_every_k
from ragkit.metrics.spans import (
    SPAN_AT_K,
    AnswerGroups,
    AnswerSpan,
    has_spans,
    overlaps,
    span_average_precision_at_k,
    span_f1_at_k,
    span_hit_at_k,
    span_metrics,
    span_ndcg_at_k,
    span_precision_at_k,
    span_recall_at_k,
    span_reciprocal_rank,
    span_reciprocal_rank_at_k,
)

__all__ = [
    "CURVE_MAX_K", "CURVE_METRICS", "DEFAULT_KS", "AnswerGroups", "AnswerSpan", "FinalContext", "Passage",
    "RetrievedSpan", "average_precision_at_k", "budget_cut", "budget_metrics", "curve_metrics", "doc_metrics",
    "doc_ranking_at_k", "f1_at_k",
    "final_context_metrics", "has_relevant", "has_spans", "hit_at_k", "metric_ks", "ndcg_at_k", "overlaps",
    "passage_metrics", "precision_at_k", "question_metrics",
    "recall_at_k", "reciprocal_rank", "reciprocal_rank_at_k", "retrieval_metrics", "run_metrics", "scored_ks",
    "span_average_precision_at_k", "span_f1_at_k", "span_hit_at_k", "span_metrics", "span_ndcg_at_k",
    "span_precision_at_k", "span_recall_at_k", "span_reciprocal_rank", "span_reciprocal_rank_at_k",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20, 50, 100)

# Metrics charted as curves over k = 1..CURVE_MAX_K; the rest are scored at the run's scored ks
# only, which keeps the scores table small for large grids.
CURVE_METRICS: tuple[str, ...] = ("recall", "ndcg", "span_recall", "span_ndcg")
CURVE_MAX_K = 20


def metric_ks(top_k: int) -> list[int]:
    """The default cut-offs up to ``top_k`` plus ``top_k`` itself, so the full depth is always scored."""
    check_k(top_k)
    return sorted({k for k in DEFAULT_KS if k <= top_k} | {top_k})


def scored_ks(top_k: int, depth: int, other_depths: Iterable[int] = ()) -> list[int]:
    """The cut-offs a run scores: metric_ks(top_k), its own ``depth`` (the most chunks its final
    context can hold), and every other run's depth up to max(top_k, depth), so that any two runs
    can be compared at their common depth min(depth_a, depth_b)."""
    check_k(depth)
    limit = max(top_k, depth)
    return sorted(set(metric_ks(top_k)) | {depth} | {d for d in other_depths if d <= limit})


def retrieval_metrics(
    retrieved: Sequence[RetrievedSpan],
    relevant_docs: Mapping[str, float] | None,
    answer_groups: AnswerGroups | None,
    ks: Sequence[int],
) -> dict[str, float]:
    """Every ranking metric the ground truth allows at each k; a level without it is left out."""
    for k in ks:
        check_k(k)
    scores: dict[str, float] = {}
    if has_relevant(relevant_docs):
        scores.update(doc_metrics(retrieved, relevant_docs, ks))
    if has_spans(answer_groups):
        scores.update(span_metrics(retrieved, answer_groups, ks))
    return scores


def run_metrics(
    retrieved: Sequence[RetrievedSpan],
    relevant_docs: Mapping[str, float] | None,
    answer_groups: AnswerGroups | None,
    top_k: int,
    ks: Sequence[int] | None = None,
) -> dict[str, float]:
    """The ranking metrics a run records per question: every family at ``ks`` (default
    metric_ks(top_k)), plus the curve metrics at every k from 1 to min(top_k, CURVE_MAX_K)."""
    ks = sorted(ks) if ks is not None else metric_ks(top_k)
    scores = retrieval_metrics(retrieved, relevant_docs, answer_groups, ks)
    curve_ks = [k for k in range(1, min(top_k, CURVE_MAX_K) + 1) if k not in ks]
    scores.update(curve_metrics(retrieved, relevant_docs, answer_groups, curve_ks))
    return scores


def curve_metrics(
    retrieved: Sequence[RetrievedSpan],
    relevant_docs: Mapping[str, float] | None,
    answer_groups: AnswerGroups | None,
    ks: Sequence[int],
) -> dict[str, float]:
    """The curve families (CURVE_METRICS) alone at each of ``ks``: what ``retrieval_metrics``
    gives for them, without computing the other families (a grid scores millions of questions)."""
    scores: dict[str, float] = {}
    if has_relevant(relevant_docs):
        doc_curves = {family: DOC_AT_K[family] for family in CURVE_METRICS if family in DOC_AT_K}
        scores.update(scores_at_every_k(doc_curves, retrieved, relevant_docs, ks))
    if has_spans(answer_groups):
        span_curves = {family: SPAN_AT_K[family] for family in CURVE_METRICS if family in SPAN_AT_K}
        scores.update(scores_at_every_k(span_curves, retrieved, answer_groups, ks))
    return scores


def question_metrics(
    context: FinalContext,
    relevant_docs: Mapping[str, float] | None,
    answer_groups: AnswerGroups | None,
    top_k: int,
    ks: Sequence[int] | None = None,
    passages: Sequence[Passage] | None = None,
) -> dict[str, float]:
    """Everything a run records per question about its final context: the ranking metrics
    (run_metrics), the passage metrics at the same ks (given relevant ``passages``), the
    token-budget metrics and the final-context metrics. Scoring ``FinalContext.empty()`` gives
    the names a question would have had, e.g. for a failure."""
    return {
        **run_metrics(context.chunks, relevant_docs, answer_groups, top_k, ks),
        **passage_metrics(context.chunks, passages, sorted(ks) if ks is not None else metric_ks(top_k)),
        **budget_metrics(context, relevant_docs, answer_groups),
        **final_context_metrics(context, relevant_docs, answer_groups),
    }
