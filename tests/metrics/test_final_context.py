"""Final context metrics: a table of hand-computed cases."""

from __future__ import annotations

import pytest

from ragkit.metrics.final_context import FinalContext, final_context_metrics
from ragkit.metrics.names import FINAL_CONTEXT_METRICS

pytestmark = pytest.mark.unit


def context(chunks: list[tuple[str, int, int]], tokens: list[int]) -> FinalContext:
    return FinalContext(chunks, tokens, lambda index, n: 0)


# Two chunks of a, one of b, one of c; a and d relevant; the answer has a part in a (covered by
# the second chunk) and a part in d (never retrieved).
FOUR = context([("a", 0, 10), ("a", 10, 20), ("b", 0, 10), ("c", 0, 10)], [3, 4, 5, 6])
QRELS = {"a": 1.0, "d": 2.0}
PARTS = [[("a", 12, 14)], [("d", 0, 5)]]


@pytest.mark.parametrize(
    ("final", "relevant", "groups", "expected"),
    [
        (FOUR, QRELS, PARTS, {"final_chunks": 4, "final_tokens": 18, "final_recall": 1 / 2,
                              "final_precision": 2 / 4, "final_span_recall": 1 / 2, "final_span_precision": 1 / 4}),
        # alternatives: the part is covered through either document
        (FOUR, QRELS, [[("d", 0, 5), ("b", 5, 6)]],
         {"final_chunks": 4, "final_tokens": 18, "final_recall": 1 / 2, "final_precision": 2 / 4,
          "final_span_recall": 1.0, "final_span_precision": 1 / 4}),
        # an empty final context is a result: nothing passed on, nothing found
        (FinalContext.empty(), QRELS, PARTS, {"final_chunks": 0, "final_tokens": 0, "final_recall": 0.0,
                                              "final_precision": 0.0, "final_span_recall": 0.0,
                                              "final_span_precision": 0.0}),
        # without ground truth only the size is scored
        (FOUR, None, None, {"final_chunks": 4, "final_tokens": 18}),
        (FOUR, {}, [[]], {"final_chunks": 4, "final_tokens": 18}),
        (FOUR, QRELS, None, {"final_chunks": 4, "final_tokens": 18, "final_recall": 1 / 2, "final_precision": 2 / 4}),
    ],
)
def test_final_context_metrics(final, relevant, groups, expected) -> None:
    assert final_context_metrics(final, relevant, groups) == pytest.approx(expected)


def test_every_final_context_metric_is_catalogued() -> None:
    assert tuple(final_context_metrics(FOUR, QRELS, PARTS)) == FINAL_CONTEXT_METRICS


def test_final_tokens_are_cl100k_tokens_of_the_chunk_texts() -> None:
    final = FinalContext.from_texts([("a", 0, 11), ("b", 0, 5)], ["hello world", "hello"])
    assert final_context_metrics(final, None, None) == {"final_chunks": 2, "final_tokens": 3}
