"""Chunk grades as TREC qrels: ``query-id 0 doc-id grade`` per line, on the person's 0-2 scale.

Two levels: ``document`` (a document's grade is its best pooled chunk's, which is how BEIR and
TREC tools read document ids) and ``span`` (one line per pooled chunk, its id
``<doc_id>:<start>-<end>``, for passage-level evaluation). A grade 0 is written too: a judged
non-relevant item is information that trec_eval and ranx use (unjudged is not the same).
"""

from __future__ import annotations

import pandas as pd

from ragkit.errors import ConfigError
from ragkit.labels.grades import GradeSource, chunk_grades
from ragkit.labels.pooling import Pool

LEVELS = ("document", "span")


def span_id(doc_id: str, start: int, end: int) -> str:
    return f"{doc_id}:{int(start)}-{int(end)}"


def graded_items(pool: Pool, labels: pd.DataFrame, grades: GradeSource) -> pd.DataFrame:
    """question_id, doc_id, start_char, end_char, relevance, grade_source of the pool's graded chunks."""
    graded = chunk_grades(labels[labels["pool_id"] == pool.pool_id], grades)
    spans = pd.DataFrame([{"question_id": q.question_id, "item_id": c.item_id, "doc_id": c.doc_id,
                           "start_char": c.start_char, "end_char": c.end_char}
                          for q in pool.questions for c in q.chunks],
                         columns=["question_id", "item_id", "doc_id", "start_char", "end_char"])
    return spans.merge(graded, on=["question_id", "item_id"], how="inner")


def qrels_lines(items: pd.DataFrame, level: str = "document") -> list[str]:
    if level not in LEVELS:
        raise ConfigError(f"unknown qrels level '{level}'. Valid levels: {', '.join(LEVELS)}")
    if items.empty:
        return []
    if level == "document":
        best = items.groupby(["question_id", "doc_id"], sort=True)["relevance"].max().reset_index()
        return [f"{row.question_id} 0 {row.doc_id} {int(row.relevance)}" for row in best.itertuples(index=False)]
    ordered = items.sort_values(["question_id", "doc_id", "start_char", "end_char"])
    return [f"{row.question_id} 0 {span_id(row.doc_id, row.start_char, row.end_char)} {int(row.relevance)}"
            for row in ordered.itertuples(index=False)]


def to_qrels(pool: Pool, labels: pd.DataFrame, grades: GradeSource = "human", level: str = "document") -> str:
    lines = qrels_lines(graded_items(pool, labels, grades), level)
    return "\n".join(lines) + ("\n" if lines else "")
