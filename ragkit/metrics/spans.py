"""Span-level retrieval metrics of one question: does the ranking hold the answer's text?

Ground truth: answer *groups*, one per part of the answer, each a list of spans ``(doc_id, start,
end)`` (half-open [start, end)), as ``Question.span_groups()`` gives them.

- **Alternatives are any-of.** The spans of one group are alternative places of one answer part
  (e.g. the same fact stated twice): a chunk *covers* the group when it overlaps any of them.
- **Parts are all-of.** Different groups are parts of a multi-part answer, all needed: recall is
  the share of groups covered. A part whose answer was not found in any document is an empty
  group; it counts in the number of groups G and can never be covered.
- A chunk *overlaps* a span when it is from the same document and chunk_start < span_end and
  span_start < chunk_end: touching boundaries do not overlap.
- The cut rule is **k chunks, not k documents**: "the first k" are the first k retrieved chunks.

Metrics (G = number of groups; span metrics need at least one span in some group):

- span_recall@k = groups covered by the first k chunks / G.
- span_hit@k = 1 if the first k chunks cover any group, else 0.
- span_precision@k = chunks among the first k that overlap any span / k.
- span_f1@k = harmonic mean of span_precision@k and span_recall@k, 0 when both are 0.
- A chunk is a *new hit* when it covers a group that no higher-ranked chunk covers, so repeated
  chunks of the same answer do not inflate the ranking metrics below. A chunk covering several
  new groups still counts once (the ideal ranking has one chunk per group).
- span_ndcg@k: binary gain 1 per new hit among the first k chunks, DCG = sum gain_i /
  log2(i + 1); IDCG = min(k, G) gains of 1.
- span_map@k = sum of (new hits in the first i chunks / i) over new-hit positions i <= k,
  divided by G.
- span_mrr@k = 1 / rank of the first chunk among the first k that overlaps any span, else 0.
- span_mrr = the same over the whole list (no cut).

So a rank-1 chunk that covers a one-part answer scores 1.0 on span_recall, span_hit, span_ndcg,
span_map and span_mrr at every k, however many alternative spans it overlaps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeGuard

from ragkit.metrics.names import SPAN_FAMILIES
from ragkit.metrics.ranking import (
    RetrievedSpan,
    average_precision,
    check_k,
    dcg,
    f1,
    first_hit_reciprocal_rank,
    scores_at_every_k,
)

AnswerSpan = tuple[str, int, int]
AnswerGroups = Sequence[Sequence[AnswerSpan]]


def overlaps(chunk: RetrievedSpan, span: AnswerSpan) -> bool:
    """Half-open overlap in the same document; chunks that only touch a span do not count."""
    return chunk[0] == span[0] and chunk[1] < span[2] and span[1] < chunk[2]


def covered_groups(chunk: RetrievedSpan, groups: AnswerGroups) -> set[int]:
    """Indexes of the groups ``chunk`` covers: it overlaps any of their spans."""
    return {index for index, group in enumerate(groups) if any(overlaps(chunk, span) for span in group)}


def has_spans(groups: AnswerGroups | None) -> TypeGuard[AnswerGroups]:
    """Whether the span level can be scored: some group has a span."""
    if not groups:
        return False
    return any(groups)


def _check_groups(groups: AnswerGroups) -> None:
    if not has_spans(groups):
        raise ValueError("span metrics need at least one answer span")
    flat = next((group for group in groups if group and isinstance(group[0], str)), None)
    if flat is not None:
        raise ValueError(f"answer groups are lists of spans, got the span {flat!r}: pass [[span, ...], ...]")


def span_recall(chunks: Sequence[RetrievedSpan], groups: AnswerGroups) -> float:
    """Groups covered by any of ``chunks`` / all groups."""
    _check_groups(groups)
    covered = set().union(*(covered_groups(chunk, groups) for chunk in chunks))
    return len(covered) / len(groups)


def overlapping_chunks(chunks: Sequence[RetrievedSpan], groups: AnswerGroups) -> int:
    """How many of ``chunks`` overlap any span."""
    _check_groups(groups)
    return sum(bool(covered_groups(chunk, groups)) for chunk in chunks)


def _new_hits(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> list[bool]:
    check_k(k)
    _check_groups(groups)
    seen: set[int] = set()
    hits: list[bool] = []
    for chunk in retrieved[:k]:
        covered = covered_groups(chunk, groups)
        hits.append(bool(covered - seen))
        seen |= covered
    return hits


def span_recall_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    check_k(k)
    return span_recall(retrieved[:k], groups)


def span_precision_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    check_k(k)
    return overlapping_chunks(retrieved[:k], groups) / k


def span_f1_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    return f1(span_precision_at_k(retrieved, groups, k), span_recall_at_k(retrieved, groups, k))


def span_hit_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    return float(span_recall_at_k(retrieved, groups, k) > 0)


def span_ndcg_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    hits = _new_hits(retrieved, groups, k)
    return dcg([float(hit) for hit in hits]) / dcg([1.0] * min(k, len(groups)))


def span_average_precision_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    return average_precision(_new_hits(retrieved, groups, k), len(groups))


def span_reciprocal_rank_at_k(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, k: int) -> float:
    check_k(k)
    return span_reciprocal_rank(retrieved[:k], groups)


def span_reciprocal_rank(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups) -> float:
    """span_mrr: over the whole list, no cut."""
    _check_groups(groups)
    return first_hit_reciprocal_rank([bool(covered_groups(chunk, groups)) for chunk in retrieved])


# The families scored at every k, named once in ragkit.metrics.names, each with its function.
SPAN_AT_K: dict[str, Callable[[Sequence[RetrievedSpan], AnswerGroups, int], float]] = dict(zip(
    SPAN_FAMILIES,
    (span_recall_at_k, span_precision_at_k, span_f1_at_k, span_hit_at_k, span_ndcg_at_k,
     span_average_precision_at_k, span_reciprocal_rank_at_k),
    strict=True,
))


def span_metrics(retrieved: Sequence[RetrievedSpan], groups: AnswerGroups, ks: Sequence[int]) -> dict[str, float]:
    """Every family at every k, plus the uncut ``span_mrr``; some group must hold a span."""
    return {**scores_at_every_k(SPAN_AT_K, retrieved, groups, ks),
            "span_mrr": span_reciprocal_rank(retrieved, groups)}
