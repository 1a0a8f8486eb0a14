"""Retrieval metrics: tables of hand-computed cases, plus a cross-check against ranx.

Span ground truth is a list of answer groups (parts, all-of), each a list of alternative spans
(any-of). The old flat span lists read here as one group per span.
"""

from __future__ import annotations

import math
import random

import pytest

from ragkit.metrics.documents import DOC_AT_K
from ragkit.metrics.names import DOC_FAMILIES, SPAN_FAMILIES, parse_metric
from ragkit.metrics.retrieval import (
    CURVE_METRICS,
    DEFAULT_KS,
    average_precision_at_k,
    doc_metrics,
    doc_ranking_at_k,
    f1_at_k,
    hit_at_k,
    metric_ks,
    ndcg_at_k,
    overlaps,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    reciprocal_rank_at_k,
    retrieval_metrics,
    run_metrics,
    scored_ks,
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
from ragkit.metrics.spans import SPAN_AT_K

log2 = math.log2


def chunks(*doc_ids: str) -> list[tuple[str, int, int]]:
    """One 100-character chunk per doc id; repeated ids become consecutive chunks of that doc."""
    seen: dict[str, int] = {}
    result = []
    for doc_id in doc_ids:
        start = 100 * seen.get(doc_id, 0)
        seen[doc_id] = seen.get(doc_id, 0) + 1
        result.append((doc_id, start, start + 100))
    return result


# d1 twice before d2: the first 3 chunks hold only 2 distinct documents.
MIXED = chunks("d1", "d1", "d2", "d3", "d2", "d4")
MIXED_QRELS = {"d2": 1, "d4": 2, "d9": 1, "d5": 0}  # d9 is never retrieved; d5 is judged irrelevant
MIXED_IDCG = 2 / log2(2) + 1 / log2(3) + 1 / log2(4)  # grades 2, 1, 1
ONLY_A = chunks("a", "a", "a")
GRADED = chunks("low", "high")
GRADED_QRELS = {"low": 1, "high": 3}
MISS = chunks("x", "y", "z")
LATE = chunks("x", "x", "x", "a")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("retrieved", "k", "expected"),
    [
        (MIXED, 1, ["d1"]),
        (MIXED, 3, ["d1", "d2"]),
        (MIXED, 6, ["d1", "d2", "d3", "d4"]),
        (MIXED, 100, ["d1", "d2", "d3", "d4"]),
        ([], 5, []),
    ],
)
def test_doc_ranking_dedupes_within_the_first_k_chunks(retrieved, k, expected) -> None:
    assert doc_ranking_at_k(retrieved, k) == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    ("metric", "retrieved", "relevant", "k", "expected"),
    [
        # recall: relevant distinct docs found / all relevant (d5 has grade 0, so 3 relevant)
        (recall_at_k, MIXED, MIXED_QRELS, 1, 0 / 3),
        (recall_at_k, MIXED, MIXED_QRELS, 3, 1 / 3),
        (recall_at_k, MIXED, MIXED_QRELS, 6, 2 / 3),
        (recall_at_k, MIXED, MIXED_QRELS, 10, 2 / 3),  # k larger than the list
        (recall_at_k, ONLY_A, {"a": 1, "b": 1}, 3, 1 / 2),  # three chunks of a count once
        (recall_at_k, MISS, {"a": 1}, 3, 0 / 1),
        # precision: divided by k, also when fewer than k distinct docs were found
        (precision_at_k, MIXED, MIXED_QRELS, 3, 1 / 3),
        (precision_at_k, MIXED, MIXED_QRELS, 6, 2 / 6),
        (precision_at_k, MIXED, MIXED_QRELS, 10, 2 / 10),
        (precision_at_k, ONLY_A, {"a": 1, "b": 1}, 3, 1 / 3),  # not 3/3: duplicates do not inflate
        (precision_at_k, MISS, {"a": 1}, 3, 0 / 3),
        # f1: harmonic mean, 0 when both are 0
        (f1_at_k, MIXED, MIXED_QRELS, 3, 2 * (1 / 3) * (1 / 3) / (1 / 3 + 1 / 3)),
        (f1_at_k, MIXED, MIXED_QRELS, 6, 2 * (2 / 6) * (2 / 3) / (2 / 6 + 2 / 3)),
        (f1_at_k, MISS, {"a": 1}, 3, 0.0),
        # hit
        (hit_at_k, MIXED, MIXED_QRELS, 1, 0.0),
        (hit_at_k, MIXED, MIXED_QRELS, 3, 1.0),
        (hit_at_k, MISS, {"a": 1}, 3, 0.0),
        # ndcg: linear gain = grade at deduped doc positions, IDCG from sorted grades cut at k
        (ndcg_at_k, MIXED, MIXED_QRELS, 1, 0 / (2 / log2(2))),
        (ndcg_at_k, MIXED, MIXED_QRELS, 3, (0 / log2(2) + 1 / log2(3)) / MIXED_IDCG),
        (ndcg_at_k, MIXED, MIXED_QRELS, 6, (1 / log2(3) + 2 / log2(5)) / MIXED_IDCG),
        (ndcg_at_k, MIXED, MIXED_QRELS, 10, (1 / log2(3) + 2 / log2(5)) / MIXED_IDCG),
        (ndcg_at_k, GRADED, GRADED_QRELS, 1, (1 / log2(2)) / (3 / log2(2))),
        (ndcg_at_k, GRADED, GRADED_QRELS, 2, (1 / log2(2) + 3 / log2(3)) / (3 / log2(2) + 1 / log2(3))),
        (ndcg_at_k, chunks("high", "low"), GRADED_QRELS, 2, 1.0),
        (ndcg_at_k, ONLY_A, {"a": 1, "b": 1}, 3, (1 / log2(2)) / (1 / log2(2) + 1 / log2(3))),
        (ndcg_at_k, MISS, {"a": 1}, 3, 0.0),
        # AP@k: precision@i at relevant deduped positions, divided by all relevant (R), not min(R, k)
        (average_precision_at_k, MIXED, MIXED_QRELS, 3, (1 / 2) / 3),
        (average_precision_at_k, MIXED, MIXED_QRELS, 6, (1 / 2 + 2 / 4) / 3),
        (average_precision_at_k, MIXED, MIXED_QRELS, 10, (1 / 2 + 2 / 4) / 3),
        (average_precision_at_k, GRADED, GRADED_QRELS, 1, (1 / 1) / 2),  # R = 2 > k = 1
        (average_precision_at_k, ONLY_A, {"a": 1, "b": 1}, 3, (1 / 1) / 2),
        (average_precision_at_k, MISS, {"a": 1}, 3, 0.0),
    ],
)
def test_doc_metric_at_k(metric, retrieved, relevant, k, expected) -> None:
    assert metric(retrieved, relevant, k) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("retrieved", "relevant", "expected"),
    [
        (MIXED, MIXED_QRELS, 1 / 2),  # d2 is the 2nd distinct doc (3rd chunk)
        (LATE, {"a": 1}, 1 / 2),  # chunk rank 4, deduped doc rank 2
        (chunks("x", "y", "z", "w", "a"), {"a": 1}, 1 / 5),  # not cut at any k
        (MISS, {"a": 1}, 0.0),
        ([], {"a": 1}, 0.0),
    ],
)
def test_reciprocal_rank(retrieved, relevant, expected) -> None:
    assert reciprocal_rank(retrieved, relevant) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("chunk", "span", "expected"),
    [
        (("a", 10, 20), ("a", 10, 20), True),  # identical
        (("a", 0, 10), ("a", 10, 20), False),  # touches the start
        (("a", 20, 30), ("a", 10, 20), False),  # touches the end
        (("a", 0, 11), ("a", 10, 20), True),  # one character in
        (("a", 19, 30), ("a", 10, 20), True),  # last character
        (("a", 12, 15), ("a", 10, 20), True),  # chunk inside the span
        (("a", 0, 100), ("a", 10, 20), True),  # span inside the chunk
        (("b", 10, 20), ("a", 10, 20), False),  # same offsets, wrong doc
    ],
)
def test_overlaps(chunk, span, expected) -> None:
    assert overlaps(chunk, span) is expected


SPANS_AB = [[("a", 10, 20)], [("b", 10, 20)]]  # two parts
# Two chunks cover the first span, then the wrong doc at the right offsets, then the second span.
SPLIT = [("a", 10, 15), ("a", 15, 20), ("c", 10, 20), ("b", 0, 11)]
SPANS_AA = [[("a", 10, 20)], [("a", 30, 40)]]  # two parts
WIDE = [("a", 15, 35), ("a", 0, 10)]  # one chunk covers both spans; the second only touches
TOUCHING = [("a", 0, 10), ("b", 20, 30), ("c", 10, 20), ("a", 19, 21)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("metric", "retrieved", "spans", "k", "expected"),
    [
        # recall: groups covered by any of the first k chunks / all groups
        (span_recall_at_k, SPLIT, SPANS_AB, 1, 1 / 2),
        (span_recall_at_k, SPLIT, SPANS_AB, 3, 1 / 2),  # the wrong doc adds nothing
        (span_recall_at_k, SPLIT, SPANS_AB, 4, 2 / 2),
        (span_recall_at_k, SPLIT, SPANS_AB, 10, 2 / 2),
        (span_recall_at_k, WIDE, SPANS_AA, 1, 2 / 2),
        (span_recall_at_k, TOUCHING, SPANS_AB, 3, 0 / 2),
        # precision: chunks among the first k that overlap any span / k
        (span_precision_at_k, SPLIT, SPANS_AB, 2, 2 / 2),  # both halves of the same span count
        (span_precision_at_k, SPLIT, SPANS_AB, 4, 3 / 4),
        (span_precision_at_k, SPLIT, SPANS_AB, 10, 3 / 10),
        (span_precision_at_k, WIDE, SPANS_AA, 2, 1 / 2),
        (span_precision_at_k, TOUCHING, SPANS_AB, 4, 1 / 4),
        # f1 and hit
        (span_f1_at_k, SPLIT, SPANS_AB, 4, 2 * (3 / 4) * (2 / 2) / (3 / 4 + 2 / 2)),
        (span_f1_at_k, TOUCHING, SPANS_AB, 3, 0.0),
        (span_hit_at_k, TOUCHING, SPANS_AB, 3, 0.0),
        (span_hit_at_k, TOUCHING, SPANS_AB, 4, 1.0),
        # ndcg: gain 1 only for a chunk that covers a not-yet-covered group; IDCG = min(k, groups) ones
        (span_ndcg_at_k, SPLIT, SPANS_AB, 2, (1 / log2(2) + 0 / log2(3)) / (1 / log2(2) + 1 / log2(3))),
        (span_ndcg_at_k, SPLIT, SPANS_AB, 4, (1 / log2(2) + 1 / log2(5)) / (1 / log2(2) + 1 / log2(3))),
        (span_ndcg_at_k, WIDE, SPANS_AA, 1, (1 / log2(2)) / (1 / log2(2))),
        (span_ndcg_at_k, WIDE, SPANS_AA, 2, (1 / log2(2)) / (1 / log2(2) + 1 / log2(3))),
        (span_ndcg_at_k, TOUCHING, SPANS_AB, 4, (1 / log2(5)) / (1 / log2(2) + 1 / log2(3))),
        (span_ndcg_at_k, TOUCHING, SPANS_AB, 3, 0.0),
        # AP@k with the same new-hit relevance, divided by the number of groups
        (span_average_precision_at_k, SPLIT, SPANS_AB, 4, (1 / 1 + 2 / 4) / 2),
        (span_average_precision_at_k, SPLIT, SPANS_AB, 3, (1 / 1) / 2),
        (span_average_precision_at_k, WIDE, SPANS_AA, 2, (1 / 1) / 2),
        (span_average_precision_at_k, TOUCHING, SPANS_AB, 4, (1 / 4) / 2),
    ],
)
def test_span_metric_at_k(metric, retrieved, spans, k, expected) -> None:
    assert metric(retrieved, spans, k) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("retrieved", "spans", "expected"),
    [
        (SPLIT, SPANS_AB, 1 / 1),
        (TOUCHING, SPANS_AB, 1 / 4),  # touching and wrong-doc chunks are skipped
        ([("c", 10, 20), ("a", 0, 10)], SPANS_AB, 0.0),
        ([], SPANS_AB, 0.0),
    ],
)
def test_span_reciprocal_rank(retrieved, spans, expected) -> None:
    assert span_reciprocal_rank(retrieved, spans) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("top_k", "expected"),
    [
        (1, [1]),
        (5, [1, 3, 5]),
        (7, [1, 3, 5, 7]),
        (100, list(DEFAULT_KS)),
        (200, [*DEFAULT_KS, 200]),
    ],
)
def test_metric_ks(top_k, expected) -> None:
    assert metric_ks(top_k) == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    "call",
    [
        lambda: metric_ks(0),
        lambda: recall_at_k(MIXED, MIXED_QRELS, 0),
        lambda: ndcg_at_k(MIXED, MIXED_QRELS, -1),
        lambda: span_ndcg_at_k(SPLIT, SPANS_AB, 0),
        lambda: span_recall_at_k(SPLIT, SPANS_AB, 0),
        lambda: retrieval_metrics(MIXED, None, None, [5, 0]),
    ],
)
def test_k_below_one_is_rejected(call) -> None:
    with pytest.raises(ValueError, match="k must be >= 1, got"):
        call()


@pytest.mark.unit
def test_missing_ground_truth_is_rejected_by_the_level_functions() -> None:
    with pytest.raises(ValueError, match="relevant document"):
        doc_metrics(MIXED, {"d1": 0}, [1])
    with pytest.raises(ValueError, match="answer span"):
        span_metrics(MIXED, [], [1])
    with pytest.raises(ValueError, match="answer span"):
        span_metrics(MIXED, [[], []], [1])  # parts whose answer was found nowhere
    with pytest.raises(ValueError, match=r"got the span \('a', 10, 20\): pass \[\[span"):
        span_metrics(MIXED, [("a", 10, 20)], [1])  # a flat list of spans, not groups


@pytest.mark.unit
def test_retrieval_metrics_keys_per_available_ground_truth() -> None:
    ks = [1, 5]
    families = ("recall", "precision", "f1", "hit", "ndcg", "map", "mrr")
    doc_keys = {f"{name}@{k}" for name in families for k in ks} | {"mrr"}
    span_keys = {f"span_{key}" for key in doc_keys}
    assert set(retrieval_metrics(SPLIT, {"a": 1}, SPANS_AB, ks)) == doc_keys | span_keys
    assert set(retrieval_metrics(SPLIT, {"a": 1}, None, ks)) == doc_keys
    assert set(retrieval_metrics(SPLIT, None, SPANS_AB, ks)) == span_keys
    assert retrieval_metrics(SPLIT, {}, [], ks) == {}
    assert retrieval_metrics(SPLIT, {"a": 0}, None, ks) == {}  # only judged-irrelevant docs
    assert retrieval_metrics(SPLIT, None, [[]], ks) == {}  # an answer found in no document


@pytest.mark.unit
def test_empty_retrieval_scores_zero_everywhere() -> None:
    scores = retrieval_metrics([], {"a": 2}, SPANS_AB, [1, 10])
    assert len(scores) == 2 * (7 * 2 + 1)
    assert all(value == 0.0 for value in scores.values())


# ranx's names for our document families at k.
RANX_NAMES = {
    "ndcg": "ndcg", "recall": "recall", "precision": "precision", "map": "map", "mrr": "mrr", "hit": "hit_rate",
}


def _ranx_scores(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], metrics: list[str]) -> dict:
    """ranx's per-query scores; a ranking gets strictly descending scores, so ranx keeps its order."""
    import ranx

    run = ranx.Run({query_id: {doc_id: float(len(ranking) - rank) for rank, doc_id in enumerate(ranking)}
                    for query_id, ranking in rankings.items()})
    ranx.evaluate(ranx.Qrels(qrels), run, metrics)
    return run.scores


@pytest.mark.unit
@pytest.mark.filterwarnings("ignore:.*unsafe cast")
def test_a_tiny_ranking_scores_as_by_hand_and_as_ranx() -> None:
    """Documents x, r1, y, r2 with r1 and r2 relevant (grade 1): by hand at k = 2 and k = 4."""
    retrieved = chunks("x", "r1", "y", "r2")
    qrels = {"r1": 1, "r2": 1}
    idcg = 1 / log2(2) + 1 / log2(3)
    by_hand = {
        2: {"recall": 1 / 2, "precision": 1 / 2, "hit": 1.0, "ndcg": (1 / log2(3)) / idcg, "map": (1 / 2) / 2,
            "mrr": 1 / 2},
        4: {"recall": 2 / 2, "precision": 2 / 4, "hit": 1.0, "ndcg": (1 / log2(3) + 1 / log2(5)) / idcg,
            "map": (1 / 2 + 2 / 4) / 2, "mrr": 1 / 2},
    }
    for k, expected in by_hand.items():
        ranx_scores = _ranx_scores({"q": ["x", "r1", "y", "r2"]}, {"q": qrels},
                                   [f"{RANX_NAMES[family]}@{k}" for family in expected])
        for family, value in expected.items():
            assert DOC_AT_K[family](retrieved, qrels, k) == pytest.approx(value, abs=1e-12), (family, k)
            assert ranx_scores[f"{RANX_NAMES[family]}@{k}"]["q"] == pytest.approx(value, abs=1e-12), (family, k)


@pytest.mark.unit
@pytest.mark.filterwarnings("ignore:.*unsafe cast")
def test_doc_metrics_agree_with_ranx() -> None:
    """ranx scores unique documents, so it gets our deduplicated ranking with descending scores.

    k = 3 with up to 5 relevant documents checks the AP normalisation (R, not min(R, k)).
    """
    rng = random.Random(20240607)
    corpus = [f"doc{i}" for i in range(15)]
    qrels: dict[str, dict[str, int]] = {}
    retrieved_by_query: dict[str, list[tuple[str, int, int]]] = {}
    for query in range(30):
        query_id = f"q{query}"
        relevant = rng.sample(corpus, rng.randint(1, 5))
        qrels[query_id] = {doc_id: rng.randint(1, 3) for doc_id in relevant}
        retrieved_by_query[query_id] = chunks(*(rng.choice(corpus) for _ in range(rng.randint(1, 20))))

    for k in (1, 3, 10):
        rankings = {query_id: doc_ranking_at_k(retrieved, k) for query_id, retrieved in retrieved_by_query.items()}
        ranx_scores = _ranx_scores(rankings, qrels, [f"{name}@{k}" for name in RANX_NAMES.values()])
        for query_id, retrieved in retrieved_by_query.items():
            for family, name in RANX_NAMES.items():
                ours = DOC_AT_K[family](retrieved, qrels[query_id], k)
                assert ours == pytest.approx(ranx_scores[f"{name}@{k}"][query_id], abs=1e-9), (family, k, query_id)

    whole = {query_id: doc_ranking_at_k(retrieved, len(retrieved))
             for query_id, retrieved in retrieved_by_query.items()}
    ranx_mrr = _ranx_scores(whole, qrels, ["mrr"])["mrr"]
    for query_id, retrieved in retrieved_by_query.items():
        assert reciprocal_rank(retrieved, qrels[query_id]) == pytest.approx(ranx_mrr[query_id], abs=1e-9)


@pytest.mark.unit
def test_run_metrics_adds_curve_points_for_every_k():
    retrieved = [("a", 0, 5), ("b", 0, 5), ("c", 0, 5), ("d", 0, 5)]
    scores = run_metrics(retrieved, {"c": 1.0}, [[("c", 2, 3)]], top_k=4)
    # recall curve: c first appears at rank 3
    assert [scores[f"recall@{k}"] for k in (1, 2, 3, 4)] == [0.0, 0.0, 1.0, 1.0]
    assert scores["span_ndcg@2"] == 0.0 and scores["ndcg@4"] == pytest.approx(1 / math.log2(4))
    # non-curve metrics only at metric_ks(4) = 1, 3, 4
    assert "precision@2" not in scores and "precision@3" in scores and "precision@4" in scores


@pytest.mark.unit
def test_curve_points_are_what_every_family_at_those_ks_gives_for_the_curve_families() -> None:
    """run_metrics scores only the curve families at the extra ks; on random rankings (documents
    and spans, either ground truth missing) that equals filtering the full families' scores."""
    rng = random.Random(20261125)
    for _ in range(300):
        retrieved = [(f"d{rng.randrange(6)}", start, start + 50) for start in
                     (rng.randrange(0, 200) for _ in range(rng.randrange(0, 12)))]
        relevant = rng.choice([None, {f"d{rng.randrange(6)}": float(rng.randrange(0, 3))}])
        groups = rng.choice([None, [[(f"d{rng.randrange(6)}", a, a + 20)] for a in (rng.randrange(200),)]])
        top_k = rng.randrange(1, 25)
        ks = metric_ks(top_k)
        full = retrieval_metrics(retrieved, relevant, groups, range(1, 21))
        expected = {**retrieval_metrics(retrieved, relevant, groups, ks),
                    **{name: value for name, value in full.items() if parse_metric(name).family in CURVE_METRICS
                       and parse_metric(name).k not in ks and (parse_metric(name).k or 0) <= min(top_k, 20)}}
        assert run_metrics(retrieved, relevant, groups, top_k) == expected


@pytest.mark.unit
def test_the_families_scored_at_k_are_the_catalogued_ones() -> None:
    assert set(DOC_AT_K) == set(DOC_FAMILIES)
    assert set(SPAN_AT_K) == set(SPAN_FAMILIES)


# One answer part stated twice, the two statements overlapping: alternatives, any-of.
ALTERNATIVES = [[("a", 10, 30), ("a", 20, 40)]]
BOTH_ALTERNATIVES = [("a", 0, 50), ("x", 0, 10), ("y", 0, 10)]  # rank 1 covers both spans
# The same part found in two documents: covered by either.
ELSEWHERE = [[("a", 0, 10), ("b", 0, 10)]]
# Two parts, the second with two alternatives: all-of across parts.
TWO_PARTS = [[("a", 0, 10)], [("b", 0, 10), ("c", 0, 10)]]
PARTS_RANKING = [("c", 0, 50), ("x", 0, 5), ("a", 0, 50), ("b", 0, 50)]
# Two parts, the second found in no document: it counts, and is never covered.
UNRESOLVED = [[("a", 0, 10)], []]


@pytest.mark.unit
@pytest.mark.parametrize("k", [1, 2, 3, 10])
@pytest.mark.parametrize("metric", [span_recall_at_k, span_hit_at_k, span_ndcg_at_k, span_average_precision_at_k,
                                    span_reciprocal_rank_at_k])
def test_a_rank_1_chunk_covering_both_alternatives_scores_1_at_every_k(metric, k) -> None:
    assert metric(BOTH_ALTERNATIVES, ALTERNATIVES, k) == 1.0


@pytest.mark.unit
def test_alternatives_give_perfect_uncut_and_rank_1_scores() -> None:
    assert span_reciprocal_rank(BOTH_ALTERNATIVES, ALTERNATIVES) == 1.0
    assert span_precision_at_k(BOTH_ALTERNATIVES, ALTERNATIVES, 1) == 1.0
    assert span_precision_at_k(BOTH_ALTERNATIVES, ALTERNATIVES, 2) == 1 / 2
    assert span_f1_at_k(BOTH_ALTERNATIVES, ALTERNATIVES, 1) == 1.0


@pytest.mark.unit
@pytest.mark.parametrize(
    ("metric", "retrieved", "groups", "k", "expected"),
    [
        # one part in two documents: the second chunk covers nothing new
        (span_recall_at_k, [("b", 0, 50), ("a", 0, 50)], ELSEWHERE, 1, 1.0),
        (span_ndcg_at_k, [("b", 0, 50), ("a", 0, 50)], ELSEWHERE, 2, 1.0),  # IDCG = min(2, 1 group) = 1
        (span_average_precision_at_k, [("b", 0, 50), ("a", 0, 50)], ELSEWHERE, 2, 1.0),
        (span_precision_at_k, [("b", 0, 50), ("a", 0, 50)], ELSEWHERE, 2, 2 / 2),
        (span_ndcg_at_k, [("x", 0, 50), ("a", 0, 50)], ELSEWHERE, 2, (1 / log2(3)) / 1),
        # two parts: the ranking covers part 2 (via c) at rank 1 and part 1 at rank 3
        (span_recall_at_k, PARTS_RANKING, TWO_PARTS, 1, 1 / 2),
        (span_recall_at_k, PARTS_RANKING, TWO_PARTS, 2, 1 / 2),
        (span_recall_at_k, PARTS_RANKING, TWO_PARTS, 3, 2 / 2),
        (span_hit_at_k, PARTS_RANKING, TWO_PARTS, 1, 1.0),
        (span_precision_at_k, PARTS_RANKING, TWO_PARTS, 4, 3 / 4),  # b overlaps a span, though not new
        (span_ndcg_at_k, PARTS_RANKING, TWO_PARTS, 1, 1.0),  # IDCG = min(1, 2) = 1 gain
        (span_ndcg_at_k, PARTS_RANKING, TWO_PARTS, 4, (1 / log2(2) + 1 / log2(4)) / (1 / log2(2) + 1 / log2(3))),
        (span_average_precision_at_k, PARTS_RANKING, TWO_PARTS, 4, (1 / 1 + 2 / 3) / 2),
        (span_average_precision_at_k, PARTS_RANKING, TWO_PARTS, 2, (1 / 1) / 2),
        (span_reciprocal_rank_at_k, PARTS_RANKING, TWO_PARTS, 1, 1.0),
        # one chunk covering both parts is one new hit: the ideal ranking has one chunk per part
        (span_recall_at_k, [("a", 0, 50)], [[("a", 0, 10)], [("a", 20, 30)]], 1, 2 / 2),
        (span_ndcg_at_k, [("a", 0, 50)], [[("a", 0, 10)], [("a", 20, 30)]], 2, 1 / (1 + 1 / log2(3))),
        (span_average_precision_at_k, [("a", 0, 50)], [[("a", 0, 10)], [("a", 20, 30)]], 2, (1 / 1) / 2),
        # an unresolved part counts in every denominator
        (span_recall_at_k, [("a", 0, 50)], UNRESOLVED, 1, 1 / 2),
        (span_hit_at_k, [("a", 0, 50)], UNRESOLVED, 1, 1.0),
        (span_ndcg_at_k, [("a", 0, 50)], UNRESOLVED, 1, 1.0),
        (span_ndcg_at_k, [("a", 0, 50)], UNRESOLVED, 5, 1 / (1 + 1 / log2(3))),
        (span_average_precision_at_k, [("a", 0, 50)], UNRESOLVED, 5, 1 / 2),
    ],
)
def test_span_groups(metric, retrieved, groups, k, expected) -> None:
    assert metric(retrieved, groups, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("retrieved", "relevant", "k", "expected"),
    [
        (LATE, {"a": 1}, 1, 0.0),
        (LATE, {"a": 1}, 3, 0.0),  # three chunks of x: a is not among the first 3 chunks
        (LATE, {"a": 1}, 4, 1 / 2),  # chunk rank 4, doc rank 2
        (LATE, {"a": 1}, 10, 1 / 2),
        (MIXED, MIXED_QRELS, 1, 0.0),
        (MIXED, MIXED_QRELS, 3, 1 / 2),
        (MIXED, MIXED_QRELS, 6, 1 / 2),
        (GRADED, GRADED_QRELS, 1, 1.0),  # any grade > 0 is relevant
        ([], {"a": 1}, 5, 0.0),
    ],
)
def test_mrr_at_k(retrieved, relevant, k, expected) -> None:
    assert reciprocal_rank_at_k(retrieved, relevant, k) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("retrieved", "groups", "k", "expected"),
    [
        (TOUCHING, SPANS_AB, 3, 0.0),
        (TOUCHING, SPANS_AB, 4, 1 / 4),
        (PARTS_RANKING, TWO_PARTS, 1, 1.0),
        ([("x", 0, 5), ("b", 0, 50)], ELSEWHERE, 1, 0.0),
        ([("x", 0, 5), ("b", 0, 50)], ELSEWHERE, 2, 1 / 2),
        ([], ELSEWHERE, 3, 0.0),
    ],
)
def test_span_mrr_at_k(retrieved, groups, k, expected) -> None:
    assert span_reciprocal_rank_at_k(retrieved, groups, k) == pytest.approx(expected)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("top_k", "depth", "plan_depths", "expected"),
    [
        (10, 10, [10], [1, 3, 5, 10]),
        (10, 5, [5, 10], [1, 3, 5, 10]),  # rerank top_n 5: its own depth is a default k already
        (10, 4, [4, 8, 10], [1, 3, 4, 5, 8, 10]),  # other depths up to top_k, so every pair has its min
        (10, 10, [4, 8, 10, 20], [1, 3, 4, 5, 8, 10]),  # a deeper run meets this one at 10
        (5, 12, [5, 12, 30], [1, 3, 5, 12]),  # multi-query fusion returns more than top_k
    ],
)
def test_scored_ks(top_k, depth, plan_depths, expected) -> None:
    assert scored_ks(top_k, depth, plan_depths) == expected


@pytest.mark.unit
def test_run_metrics_scores_every_family_at_the_given_ks() -> None:
    retrieved = [("a", 0, 5), ("b", 0, 5), ("c", 0, 5), ("d", 0, 5)]
    scores = run_metrics(retrieved, {"c": 1.0}, [[("c", 2, 3)]], top_k=4, ks=[2, 4])
    assert scores["precision@2"] == 0.0 and scores["mrr@4"] == 1 / 3 and scores["span_mrr@2"] == 0.0
    assert "precision@1" not in scores and "precision@3" not in scores
    assert scores["recall@3"] == 1.0  # a curve point
