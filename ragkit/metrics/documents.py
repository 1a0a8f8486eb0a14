"""Document-level retrieval metrics of one question.

Ground truth: ``relevant_docs``, doc_id -> graded relevance; a grade > 0 is relevant (BEIR qrels
may list judged-irrelevant documents with grade 0). An empty ranking is a real failure to
retrieve and scores 0.

The cut rule is **k chunks, not k documents**: doc ranking@k is the distinct documents among the
first k retrieved *chunks*, in order of first appearance. This is what an LLM given the top-k
chunks actually sees, so it may hold fewer than k documents. When a chunk is a whole document the
two coincide and every metric below equals trec_eval's and ranx's.

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
- mrr@k = 1 / position of the first relevant document in doc ranking@k, 0 when none is there
  (ranx ``mrr@k``).
- mrr = the same over the whole retrieved list (no cut).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeGuard

from ragkit.metrics.names import DOC_FAMILIES
from ragkit.metrics.ranking import (
    RetrievedSpan,
    average_precision,
    check_k,
    dcg,
    f1,
    first_hit_reciprocal_rank,
    scores_at_every_k,
)

Qrels = Mapping[str, float]


def _dedupe_docs(retrieved: Sequence[RetrievedSpan]) -> list[str]:
    # dict keeps insertion order, so this keeps each document at its first (best) rank.
    return list(dict.fromkeys(doc_id for doc_id, _, _ in retrieved))


def doc_ranking_at_k(retrieved: Sequence[RetrievedSpan], k: int) -> list[str]:
    """Distinct documents among the first k chunks, in order of first appearance."""
    check_k(k)
    return _dedupe_docs(retrieved[:k])


def has_relevant(relevant_docs: Qrels | None) -> TypeGuard[Qrels]:
    if not relevant_docs:
        return False
    return any(grade > 0 for grade in relevant_docs.values())


def relevant_set(relevant_docs: Qrels) -> set[str]:
    if not has_relevant(relevant_docs):
        raise ValueError("doc metrics need at least one relevant document (grade > 0)")
    return {doc_id for doc_id, grade in relevant_docs.items() if grade > 0}


def doc_recall(doc_ids: Iterable[str], relevant_docs: Qrels) -> float:
    """Relevant documents among ``doc_ids`` / all relevant documents."""
    relevant = relevant_set(relevant_docs)
    return len(relevant.intersection(doc_ids)) / len(relevant)


def recall_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    return doc_recall(doc_ranking_at_k(retrieved, k), relevant_docs)


def precision_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    relevant = relevant_set(relevant_docs)
    return len(relevant.intersection(doc_ranking_at_k(retrieved, k))) / k


def f1_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    return f1(precision_at_k(retrieved, relevant_docs, k), recall_at_k(retrieved, relevant_docs, k))


def hit_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    return float(recall_at_k(retrieved, relevant_docs, k) > 0)


def ndcg_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    relevant = relevant_set(relevant_docs)
    gains = [relevant_docs[doc_id] if doc_id in relevant else 0.0 for doc_id in doc_ranking_at_k(retrieved, k)]
    ideal = sorted((relevant_docs[doc_id] for doc_id in relevant), reverse=True)[:k]
    return dcg(gains) / dcg(ideal)


def average_precision_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    relevant = relevant_set(relevant_docs)
    hits = [doc_id in relevant for doc_id in doc_ranking_at_k(retrieved, k)]
    return average_precision(hits, len(relevant))


def reciprocal_rank_at_k(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, k: int) -> float:
    relevant = relevant_set(relevant_docs)
    return first_hit_reciprocal_rank([doc_id in relevant for doc_id in doc_ranking_at_k(retrieved, k)])


def reciprocal_rank(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels) -> float:
    """mrr: over the whole list, no cut."""
    relevant = relevant_set(relevant_docs)
    return first_hit_reciprocal_rank([doc_id in relevant for doc_id in _dedupe_docs(retrieved)])


# The families scored at every k, named once in ragkit.metrics.names, each with its function.
DOC_AT_K: dict[str, Callable[[Sequence[RetrievedSpan], Qrels, int], float]] = dict(zip(
    DOC_FAMILIES,
    (recall_at_k, precision_at_k, f1_at_k, hit_at_k, ndcg_at_k, average_precision_at_k, reciprocal_rank_at_k),
    strict=True,
))


def doc_metrics(retrieved: Sequence[RetrievedSpan], relevant_docs: Qrels, ks: Sequence[int]) -> dict[str, float]:
    """Every family at every k, plus the uncut ``mrr``; ``relevant_docs`` must hold a grade > 0."""
    return {**scores_at_every_k(DOC_AT_K, retrieved, relevant_docs, ks),
            "mrr": reciprocal_rank(retrieved, relevant_docs)}
