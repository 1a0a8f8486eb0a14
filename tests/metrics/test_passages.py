"""Passage metrics (Chroma's token-level chunking evaluation, in characters): a hand-computed table,
cross-checked against a set-of-characters implementation written from the paper's definition."""

from __future__ import annotations

import random

import pytest

from ragkit.metrics.names import PASSAGE_FAMILIES, parse_metric, sort_key
from ragkit.metrics.passages import passage_iou_at_k, passage_metrics, passage_precision_at_k, passage_recall_at_k
from ragkit.metrics.retrieval import FinalContext, question_metrics

pytestmark = pytest.mark.unit

D10_20 = [("d", 10, 20)]

# (chunks, passages, k, recall, precision, iou), each worked by hand: I relevant characters retrieved
# (once each), R relevant characters, T retrieved characters (summed); recall I/R, precision I/T,
# iou I/(T + R - I).
TABLE = [
    # I = 5 (10..15), R = 10, T = 15
    ([("d", 0, 15)], D10_20, 1, 0.5, 5 / 15, 5 / 20),
    # inside the passage: I = T = 6
    ([("d", 12, 18)], D10_20, 1, 0.6, 1.0, 0.6),
    # two overlapping chunks: I = 10 counted once, T = 30 (the overlap counted twice)
    ([("d", 0, 15), ("d", 10, 25)], D10_20, 2, 1.0, 10 / 30, 10 / 30),
    # another document: nothing relevant
    ([("e", 10, 20)], D10_20, 1, 0.0, 0.0, 0.0),
    # two passages in two documents, R = 20; I = 5, T = 5
    ([("d", 5, 10)], [("d", 0, 10), ("e", 0, 10)], 1, 0.25, 1.0, 0.25),
    # overlapping passages are one stretch: R = 15
    ([("d", 0, 15)], [("d", 0, 10), ("d", 5, 15)], 1, 1.0, 1.0, 1.0),
    # the cut is k chunks: at k = 1 only the unrelated chunk
    ([("e", 0, 5), ("d", 10, 20)], D10_20, 1, 0.0, 0.0, 0.0),
    # at k = 2: I = 10, T = 15
    ([("e", 0, 5), ("d", 10, 20)], D10_20, 2, 1.0, 10 / 15, 10 / 15),
    # touching is not overlapping
    ([("d", 20, 30)], D10_20, 1, 0.0, 0.0, 0.0),
    # an empty ranking scores 0
    ([], D10_20, 3, 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize(("chunks", "passages", "k", "recall", "precision", "iou"), TABLE)
def test_hand_computed_table(chunks, passages, k, recall, precision, iou):
    assert passage_recall_at_k(chunks, passages, k) == pytest.approx(recall)
    assert passage_precision_at_k(chunks, passages, k) == pytest.approx(precision)
    assert passage_iou_at_k(chunks, passages, k) == pytest.approx(iou)


def _by_character_sets(chunks, passages):
    """The paper's definition over sets of (document, character): t_e relevant, t_r retrieved,
    with the retrieved count a multiset (Chroma sums chunk lengths)."""
    relevant = {(doc, i) for doc, start, end in passages for i in range(start, end)}
    retrieved = {(doc, i) for doc, start, end in chunks for i in range(start, end)}
    inside = len(relevant & retrieved)
    total = sum(end - start for _, start, end in chunks)
    return (inside / len(relevant), inside / total if total else 0.0,
            inside / (total + len(relevant) - inside) if total + len(relevant) - inside else 0.0)


def test_agrees_with_character_sets_on_random_rankings():
    rng = random.Random(7)
    for _ in range(300):
        passages = [(rng.choice("de"), start, start + rng.randint(1, 40)) for start in
                    (rng.randint(0, 100) for _ in range(rng.randint(1, 3)))]
        chunks = [(rng.choice("def"), start, start + rng.randint(1, 60)) for start in
                  (rng.randint(0, 120) for _ in range(rng.randint(0, 6)))]
        k = max(1, len(chunks))
        expected = _by_character_sets(chunks, passages)
        got = (passage_recall_at_k(chunks, passages, k), passage_precision_at_k(chunks, passages, k),
               passage_iou_at_k(chunks, passages, k))
        assert got == pytest.approx(expected)


def test_names_are_declared_once_and_read_as_the_passage_level():
    scores = passage_metrics([("d", 0, 15)], D10_20, [1, 5])
    assert list(scores) == [f"{family}@{k}" for k in (1, 5) for family in PASSAGE_FAMILIES]
    parsed = parse_metric("passage_iou@5")
    assert (parsed.family, parsed.k, parsed.level, parsed.depth_dependent) == ("passage_iou", 5, "passage", True)
    ordered = sorted(["final_tokens", "passage_recall@5", "span_recall@5", "recall@5"], key=sort_key)
    assert ordered == ["recall@5", "span_recall@5", "passage_recall@5", "final_tokens"]


def test_a_question_scores_them_only_with_relevant_passages():
    context = FinalContext(chunks=[("d", 0, 15)], tokens=[15], prefix_chars=lambda index, n: n)
    without = question_metrics(context, {"d": 1.0}, None, top_k=3)
    with_passages = question_metrics(context, {"d": 1.0}, None, top_k=3, passages=D10_20)
    assert not any(name.startswith("passage_") for name in without)
    assert with_passages["passage_iou@3"] == pytest.approx(0.25)
    assert set(with_passages) - set(without) == {f"{f}@{k}" for f in PASSAGE_FAMILIES for k in (1, 3)}
    with pytest.raises(ValueError, match="at least one relevant passage"):
        passage_recall_at_k([("d", 0, 1)], [], 1)
