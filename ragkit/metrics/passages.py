"""Passage metrics of one question: how much of the retrieved text is relevant text, in characters.

Chroma's token-level chunking evaluation (Smith and Troynikov, "Evaluating Chunking Strategies for
Retrieval", 2024) counted in characters: it compares chunkers on sets whose ground truth is a
passage (a ragas or LlamaIndex set's reference contexts), where a small chunk that holds the
passage and nothing else is better than a large one that also holds it.

Ground truth: the relevant passages ``(doc_id, start, end)``, half-open: ``Question.passages``,
the reference contexts an import located. For the first k retrieved chunks ``(doc_id, start, end)``:

- I = characters of the relevant passages inside some chunk of the same document (each counted
  once, however many chunks hold it);
- R = characters of the relevant passages (their union: overlapping passages count once);
- T = the chunks' lengths summed (a character two overlapping chunks both hold counts twice:
  repeated text costs context, as in Chroma's precision);
- passage_recall@k = I / R;
- passage_precision@k = I / T, 0 when T = 0;
- passage_iou@k = I / (T + R - I), Chroma's IoU (the retrieved characters plus the relevant
  characters no chunk holds), 0 when the denominator is 0.

The cut rule is k chunks. An empty ranking scores 0; a question without relevant passages has no
passage metrics (left out, not zeroed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragkit.metrics.names import PASSAGE_FAMILIES
from ragkit.metrics.ranking import RetrievedSpan, check_k, scores_at_every_k

Passage = tuple[str, int, int]


def _union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _by_document(spans: Sequence[Passage]) -> dict[str, list[tuple[int, int]]]:
    grouped: dict[str, list[tuple[int, int]]] = {}
    for doc_id, start, end in spans:
        grouped.setdefault(doc_id, []).append((start, end))
    return {doc_id: _union(ranges) for doc_id, ranges in grouped.items()}


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Characters in both unions of disjoint sorted ranges."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def char_counts(chunks: Sequence[RetrievedSpan], passages: Sequence[Passage]) -> tuple[int, int, int]:
    """(I, R, T) of the module's rule for these chunks."""
    relevant = _by_document(passages)
    retrieved = _by_document([(doc_id, start, end) for doc_id, start, end in chunks])
    inside = sum(_intersection(ranges, retrieved.get(doc_id, [])) for doc_id, ranges in relevant.items())
    return (inside, sum(end - start for ranges in relevant.values() for start, end in ranges),
            sum(max(0, end - start) for _, start, end in chunks))


def _check(passages: Sequence[Passage]) -> None:
    if not passages:
        raise ValueError("passage metrics need at least one relevant passage")


def passage_recall_at_k(retrieved: Sequence[RetrievedSpan], passages: Sequence[Passage], k: int) -> float:
    check_k(k)
    _check(passages)
    inside, relevant, _ = char_counts(retrieved[:k], passages)
    return inside / relevant if relevant else 0.0


def passage_precision_at_k(retrieved: Sequence[RetrievedSpan], passages: Sequence[Passage], k: int) -> float:
    check_k(k)
    _check(passages)
    inside, _, total = char_counts(retrieved[:k], passages)
    return inside / total if total else 0.0


def passage_iou_at_k(retrieved: Sequence[RetrievedSpan], passages: Sequence[Passage], k: int) -> float:
    check_k(k)
    _check(passages)
    inside, relevant, total = char_counts(retrieved[:k], passages)
    union = total + relevant - inside
    return inside / union if union else 0.0


# The families scored at every k, named once in ragkit.metrics.names, each with its function.
PASSAGE_AT_K: dict[str, Callable[[Sequence[RetrievedSpan], Sequence[Passage], int], float]] = dict(zip(
    PASSAGE_FAMILIES, (passage_recall_at_k, passage_precision_at_k, passage_iou_at_k), strict=True))


def passage_metrics(retrieved: Sequence[RetrievedSpan], passages: Sequence[Passage] | None,
                    ks: Sequence[int]) -> dict[str, float]:
    """Every passage family at every k; nothing when the question has no relevant passage."""
    if not passages:
        return {}
    return scores_at_every_k(PASSAGE_AT_K, retrieved, passages, ks)
