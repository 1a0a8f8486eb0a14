"""What the document-level and span-level metrics share: the chunk type and the ranking arithmetic.

A retrieved ranking is a sequence of chunks ``(doc_id, start_char, end_char)`` in rank order
(rank 1 first, half-open character ranges); one document may appear several times.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from ragkit.metrics.names import k_name

RetrievedSpan = tuple[str, int, int]
Truth = TypeVar("Truth")


def check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain with linear gains: sum gain_i / log2(i + 1), i from 1."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def average_precision(hits: Sequence[bool], n_relevant: int) -> float:
    """Sum of precision@i over the hit positions i, divided by ``n_relevant``."""
    found = 0
    total = 0.0
    for rank, hit in enumerate(hits, start=1):
        if hit:
            found += 1
            total += found / rank
    return total / n_relevant


def first_hit_reciprocal_rank(hits: Sequence[bool]) -> float:
    """1 / position of the first hit, 0 without one."""
    return next((1 / rank for rank, hit in enumerate(hits, start=1) if hit), 0.0)


def f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def scores_at_every_k(families: Mapping[str, Callable[[Sequence[RetrievedSpan], Truth, int], float]],
                      retrieved: Sequence[RetrievedSpan], truth: Truth, ks: Iterable[int]) -> dict[str, float]:
    """``family@k`` -> each family's value at each of ``ks`` (k in the outer loop, families in
    their order), against ``truth`` (relevant documents, or answer groups)."""
    return {k_name(family, k): metric(retrieved, truth, k) for k in ks for family, metric in families.items()}
