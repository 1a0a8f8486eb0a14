"""Retrieval metrics for one question, at the document level and at the answer-span level.

A retrieved ranking is a sequence of chunks ``(doc_id, start_char, end_char)`` in rank order
(rank 1 first); one document may appear several times. An empty ranking is a real failure to
retrieve and scores 0 on every metric.

Document level (ground truth ``relevant_docs``: doc_id -> graded relevance, > 0 is relevant):

- doc ranking@k: the distinct documents among the first k retrieved *chunks*, in order of first
  appearance. This is what an LLM given the top-k chunks actually sees, so it may hold fewer
  than k documents.
- recall@k = relevant documents in doc ranking@k / all relevant documents.
- precision@k = relevant documents in doc ranking@k / k (divide by k, the IR convention, even
  when fewer than k documents were found).
- f1@k = harmonic mean of precision@k and recall@k, 0 when both are 0.
- hit@k = 1 if doc ranking@k holds any relevant document, else 0.
- ndcg@k: linear gain (the qrels grade), DCG = sum gain_i / log2(i + 1) over positions i = 1..
  of doc ranking@k; IDCG from the grades sorted descending and cut at k (trec_eval ndcg_cut,
  ranx ``ndcg@k``).
- map@k (per question: AP@k) = sum of precision@i over positions i of relevant documents in doc
  ranking@k, divided by the number of relevant documents R (trec_eval map_cut, ranx ``map@k``,
  BEIR). Some libraries divide by min(R, k) instead; we do not, so numbers stay comparable with
  published BEIR results, and AP@k cannot reach 1 when k < R.
- mrr = 1 / rank of the first relevant document in the deduplicated ranking of the *whole*
  retrieved list (no cut), 0 when none is relevant.

Span level (ground truth ``answer_spans``: (doc_id, start, end), half-open [start, end)). A chunk
overlaps a span when it is from the same document and chunk_start < span_end and
span_start < chunk_end (touching boundaries do not overlap).

- span_recall@k = answer spans overlapped by at least one of the first k chunks / all spans.
- span_precision@k = chunks among the first k that overlap any span / k.
- span_f1@k, span_hit@k: as at the document level, over the first k chunks.
- span_mrr = 1 / rank of the first chunk overlapping any span (whole list).
- A chunk is a *new hit* when it overlaps a span that no higher-ranked chunk overlaps, so
  repeated chunks of the same answer do not inflate the ranking metrics below. A chunk covering
  several new spans still counts once (the ideal ranking has one chunk per span).
- span_ndcg@k: binary gain 1 per new hit, DCG as above; IDCG = min(k, number of spans) gains.
- span_map@k = sum of (new hits in the first i chunks / i) over new-hit positions i <= k,
  divided by the number of spans.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

RetrievedSpan = tuple[str, int, int]
AnswerSpan = tuple[str, int, int]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20, 50, 100)


def metric_ks(top_k: int) -> list[int]:
    """The default cut-offs up to ``top_k`` plus ``top_k`` itself, so the full depth is always scored."""
    _check_k(top_k)
    return sorted({k for k in DEFAULT_KS if k <= top_k} | {top_k})


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def _dedupe_docs(retrieved: Sequence[RetrievedSpan]) -> list[str]:
    # dict keeps insertion order, so this keeps each document at its first (best) rank.
    return list(dict.fromkeys(doc_id for doc_id, _, _ in retrieved))


def doc_ranking_at_k(retrieved: Sequence[RetrievedSpan], k: int) -> list[str]:
    """Distinct documents among the first k chunks, in order of first appearance."""
    _check_k(k)
    return _dedupe_docs(retrieved[:k])


def _has_relevant(relevant_docs: Mapping[str, float]) -> bool:
    # BEIR qrels may list judged-but-irrelevant documents with grade 0.
    return any(grade > 0 for grade in relevant_docs.values())


def _relevant_set(relevant_docs: Mapping[str, float]) -> set[str]:
    if not _has_relevant(relevant_docs):
        raise ValueError("doc metrics need at least one relevant document (grade > 0)")
    return {doc_id for doc_id, grade in relevant_docs.items() if grade > 0}


def _check_spans(answer_spans: Sequence[AnswerSpan]) -> None:
    if not answer_spans:
        raise ValueError("span metrics need at least one answer span")


def _dcg(gains: Sequence[float]) -> float:
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def _average_precision(hits: Sequence[bool], n_relevant: int) -> float:
    found = 0
    total = 0.0
    for rank, hit in enumerate(hits, start=1):
        if hit:
            found += 1
            total += found / rank
    return total / n_relevant


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def recall_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int) -> float:
    relevant = _relevant_set(relevant_docs)
    return len(relevant.intersection(doc_ranking_at_k(retrieved, k))) / len(relevant)


def precision_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int) -> float:
    relevant = _relevant_set(relevant_docs)
    return len(relevant.intersection(doc_ranking_at_k(retrieved, k))) / k


def f1_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int) -> float:
    return _f1(precision_at_k(retrieved, relevant_docs, k), recall_at_k(retrieved, relevant_docs, k))


def hit_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int) -> float:
    return float(recall_at_k(retrieved, relevant_docs, k) > 0)


def ndcg_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int) -> float:
    relevant = _relevant_set(relevant_docs)
    gains = [relevant_docs[doc_id] if doc_id in relevant else 0.0 for doc_id in doc_ranking_at_k(retrieved, k)]
    ideal = sorted((relevant_docs[doc_id] for doc_id in relevant), reverse=True)[:k]
    return _dcg(gains) / _dcg(ideal)


def average_precision_at_k(
    retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], k: int
) -> float:
    relevant = _relevant_set(relevant_docs)
    hits = [doc_id in relevant for doc_id in doc_ranking_at_k(retrieved, k)]
    return _average_precision(hits, len(relevant))


def reciprocal_rank(retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float]) -> float:
    relevant = _relevant_set(relevant_docs)
    for rank, doc_id in enumerate(_dedupe_docs(retrieved), start=1):
        if doc_id in relevant:
            return 1 / rank
    return 0.0


def doc_metrics(
    retrieved: Sequence[RetrievedSpan], relevant_docs: Mapping[str, float], ks: Sequence[int]
) -> dict[str, float]:
    """All document-level metrics; ``relevant_docs`` must hold at least one grade > 0."""
    scores: dict[str, float] = {}
    for k in ks:
        scores[f"recall@{k}"] = recall_at_k(retrieved, relevant_docs, k)
        scores[f"precision@{k}"] = precision_at_k(retrieved, relevant_docs, k)
        scores[f"f1@{k}"] = f1_at_k(retrieved, relevant_docs, k)
        scores[f"hit@{k}"] = hit_at_k(retrieved, relevant_docs, k)
        scores[f"ndcg@{k}"] = ndcg_at_k(retrieved, relevant_docs, k)
        scores[f"map@{k}"] = average_precision_at_k(retrieved, relevant_docs, k)
    scores["mrr"] = reciprocal_rank(retrieved, relevant_docs)
    return scores


def overlaps(chunk: RetrievedSpan, span: AnswerSpan) -> bool:
    """Half-open overlap in the same document; chunks that only touch a span do not count."""
    return chunk[0] == span[0] and chunk[1] < span[2] and span[1] < chunk[2]


def _covered(chunk: RetrievedSpan, answer_spans: Sequence[AnswerSpan]) -> set[int]:
    return {index for index, span in enumerate(answer_spans) if overlaps(chunk, span)}


def _new_hits(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> list[bool]:
    _check_k(k)
    _check_spans(answer_spans)
    seen: set[int] = set()
    hits: list[bool] = []
    for chunk in retrieved[:k]:
        covered = _covered(chunk, answer_spans)
        hits.append(bool(covered - seen))
        seen |= covered
    return hits


def span_recall_at_k(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> float:
    _check_k(k)
    _check_spans(answer_spans)
    covered = set().union(*(_covered(chunk, answer_spans) for chunk in retrieved[:k]))
    return len(covered) / len(answer_spans)


def span_precision_at_k(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> float:
    _check_k(k)
    _check_spans(answer_spans)
    return sum(bool(_covered(chunk, answer_spans)) for chunk in retrieved[:k]) / k


def span_f1_at_k(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> float:
    return _f1(span_precision_at_k(retrieved, answer_spans, k), span_recall_at_k(retrieved, answer_spans, k))


def span_hit_at_k(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> float:
    return float(span_recall_at_k(retrieved, answer_spans, k) > 0)


def span_ndcg_at_k(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int) -> float:
    hits = _new_hits(retrieved, answer_spans, k)
    return _dcg([float(hit) for hit in hits]) / _dcg([1.0] * min(k, len(answer_spans)))


def span_average_precision_at_k(
    retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], k: int
) -> float:
    return _average_precision(_new_hits(retrieved, answer_spans, k), len(answer_spans))


def span_reciprocal_rank(retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan]) -> float:
    _check_spans(answer_spans)
    for rank, chunk in enumerate(retrieved, start=1):
        if _covered(chunk, answer_spans):
            return 1 / rank
    return 0.0


def span_metrics(
    retrieved: Sequence[RetrievedSpan], answer_spans: Sequence[AnswerSpan], ks: Sequence[int]
) -> dict[str, float]:
    """All span-level metrics; ``answer_spans`` must not be empty."""
    scores: dict[str, float] = {}
    for k in ks:
        scores[f"span_recall@{k}"] = span_recall_at_k(retrieved, answer_spans, k)
        scores[f"span_precision@{k}"] = span_precision_at_k(retrieved, answer_spans, k)
        scores[f"span_f1@{k}"] = span_f1_at_k(retrieved, answer_spans, k)
        scores[f"span_hit@{k}"] = span_hit_at_k(retrieved, answer_spans, k)
        scores[f"span_ndcg@{k}"] = span_ndcg_at_k(retrieved, answer_spans, k)
        scores[f"span_map@{k}"] = span_average_precision_at_k(retrieved, answer_spans, k)
    scores["span_mrr"] = span_reciprocal_rank(retrieved, answer_spans)
    return scores


def retrieval_metrics(
    retrieved: Sequence[RetrievedSpan],
    relevant_docs: Mapping[str, float] | None,
    answer_spans: Sequence[AnswerSpan] | None,
    ks: Sequence[int],
) -> dict[str, float]:
    """Every metric the ground truth allows; a level without ground truth is left out, not zeroed."""
    for k in ks:
        _check_k(k)
    scores: dict[str, float] = {}
    if relevant_docs and _has_relevant(relevant_docs):
        scores.update(doc_metrics(retrieved, relevant_docs, ks))
    if answer_spans:
        scores.update(span_metrics(retrieved, answer_spans, ks))
    return scores


# Metrics charted as curves over k = 1..CURVE_MAX_K; the rest are scored at metric_ks only,
# which keeps the scores table small for large grids.
CURVE_METRICS: tuple[str, ...] = ("recall", "ndcg", "span_recall", "span_ndcg")
CURVE_MAX_K = 20


def run_metrics(
    retrieved: Sequence[RetrievedSpan],
    relevant_docs: Mapping[str, float] | None,
    answer_spans: Sequence[AnswerSpan] | None,
    top_k: int,
) -> dict[str, float]:
    """What a run records per question: every metric at metric_ks(top_k), plus the curve
    metrics at every k from 1 to min(top_k, CURVE_MAX_K)."""
    scores = retrieval_metrics(retrieved, relevant_docs, answer_spans, metric_ks(top_k))
    curve_ks = [k for k in range(1, min(top_k, CURVE_MAX_K) + 1) if k not in metric_ks(top_k)]
    if curve_ks:
        extra = retrieval_metrics(retrieved, relevant_docs, answer_spans, curve_ks)
        scores.update({name: value for name, value in extra.items() if name.split("@")[0] in CURVE_METRICS})
    return scores
