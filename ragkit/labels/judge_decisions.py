"""The pipeline's own chunk-keeping LLM judges against people's chunk grades.

The rerank judge (``mode: llm``) and the Retrieval Judge keep or drop the chunks they are shown;
their decisions are in the results folder's ``judgements`` table (``decision`` JSON). Each judged
chunk is one item per run and question: the judge says relevant when it kept the chunk, the
person says relevant when their (low-median) grade is partly or relevant (grade >= 1,
``RELEVANT_FROM``). Both are binary, so kappa is nominal and the bias is on the 0-1 scale (the
judge's kept share minus the people's relevant share on the same chunks).

What a decision records, per judge:

- ``rerank`` with ``method: llm``: one judgement per batch, each with the chunk ids ``shown``;
  the last batch also holds ``kept`` (the top_n by the model's scores). A batch that fell back
  means the rerank returned every chunk unjudged: that question's rerank decision is left out.
  Decisions of ``method`` bm25 / cross_encoder (no LLM) are not judged here.
- ``retrieval``: one judgement per round with the ids ``shown`` and those the model found
  ``relevant`` (after its ``min_relevance`` filter); a chunk shown in several rounds counts with
  its last round. Chunks kept only by ``keep_unjudged`` were never judged and are not items.

Spans: decisions name chunks by chunk id, and people grade spans. The ``retrievals`` table of the
whole folder maps chunk_id -> (doc_id, start_char, end_char): chunk ids are content keys of the
chunk sets, so one id is one span wherever it appears. A person's graded chunk was in some pooled
run's top k, so its id is in that table; a judged chunk whose id is in no run's retrievals (a
dropped chunk no run kept) cannot be a pooled chunk of that chunker and is left out (counted as
``unlocated``). Reading the chunk-set Parquet files instead would need the data folder and the
run's plan; the retrievals table is already in the results folder.

Invalid (unparseable or fallen-back) replies are left out and counted (``Agreement.left_out``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd

from ragkit.labels.agreement import DEFAULT_RESAMPLES, Agreement, measure
from ragkit.labels.grades import human_consensus
from ragkit.labels.pooling import chunk_item_id
from ragkit.labels.store import HUMAN

RELEVANT_FROM = 1  # a person's grade partly (1) or relevant (2) counts as relevant
KEEP_NAMES = ("not relevant / dropped", "relevant / kept")
CHUNK_JUDGES = ("rerank", "retrieval")


def _decision(text: object) -> dict:
    try:
        parsed = json.loads(str(text))
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _rerank(rows: pd.DataFrame) -> tuple[list[tuple[str, int]], int]:
    """(chunk_id, kept 0/1) of one run and question's LLM rerank, and the invalid batches left out."""
    llm = [(valid, decision) for valid, decision in zip(rows["valid"], rows["decision"].map(_decision))
           if decision.get("method") == "llm"]
    invalid = sum(1 for valid, decision in llm if not valid or decision.get("action") == "fell back")
    if not llm or invalid:
        return [], invalid  # one batch fell back: the rerank returned every chunk, nothing was decided
    kept = set(next((d["kept"] for _, d in reversed(llm) if "kept" in d), []))
    shown = list(dict.fromkeys(chunk for _, decision in llm for chunk in decision.get("shown", [])))
    return [(chunk, int(chunk in kept)) for chunk in shown], 0


def _retrieval(rows: pd.DataFrame) -> tuple[list[tuple[str, int]], int]:
    """(chunk_id, relevant 0/1) of one run and question's Retrieval Judge rounds (a chunk's last
    round counts), and the invalid rounds left out."""
    found: dict[str, int] = {}
    invalid = 0
    for valid, decision in zip(rows["valid"], rows["decision"].map(_decision)):
        if not valid or decision.get("action") == "fell back":
            invalid += 1
            continue
        if "relevant" not in decision:
            continue  # nothing to judge
        relevant = set(decision["relevant"])
        found.update({chunk: int(chunk in relevant) for chunk in decision.get("shown", [])})
    return list(found.items()), invalid


EXTRACTORS = {"rerank": _rerank, "retrieval": _retrieval}


def judged_chunks(judgements: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame, int]]:
    """Per chunk judge: (judge, rows run_id/question_id/chunk_id/kept, invalid replies left out)."""
    for judge in CHUNK_JUDGES:
        mine = judgements[judgements["judge"] == judge]
        if mine.empty:
            continue
        rows, invalid = [], 0
        for (run_id, question_id), group in mine.groupby(["run_id", "question_id"], sort=True):
            decided, bad = EXTRACTORS[judge](group)
            invalid += bad
            rows += [(run_id, question_id, chunk, kept) for chunk, kept in decided]
        yield judge, pd.DataFrame(rows, columns=["run_id", "question_id", "chunk_id", "kept"]), invalid


def _spans(retrievals: pd.DataFrame) -> pd.DataFrame:
    return retrievals.drop_duplicates("chunk_id")[["chunk_id", "doc_id", "start_char", "end_char"]]


def chunk_judge_agreements(labels: pd.DataFrame, judgements: pd.DataFrame, retrievals: pd.DataFrame,
                           resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[Agreement]:
    """One agreement per chunk judge with judged chunks people graded (``judge:<name>``)."""
    chunks = labels[labels["item_kind"] == "chunk"]
    if chunks.empty or judgements.empty or retrievals.empty:
        return []
    human = human_consensus(chunks, "relevance")
    documents = chunks.drop_duplicates("question_id").set_index("question_id")["document"]
    spans = _spans(retrievals)
    found = []
    for judge, decided, invalid in judged_chunks(judgements):
        located = decided.merge(spans, on="chunk_id")
        if located.empty:
            continue
        located["item_id"] = [chunk_item_id(q, d, int(s), int(e)) for q, d, s, e in
                              located[["question_id", "doc_id", "start_char", "end_char"]].itertuples(index=False)]
        items = located.merge(human, on=["question_id", "item_id"])
        if items.empty:
            continue
        items = items.assign(unit=items["question_id"].map(documents),
                             human_class=(items["relevance"].astype(float) >= RELEVANT_FROM).astype(int),
                             judge_class=items["kept"].astype(int))
        items = items.assign(human_value=items["human_class"].astype(float),
                             judge_value=items["judge_class"].astype(float))
        ratings, human_ratings = _binary_ratings(chunks, items)
        result = measure(f"judge:{judge} (kept vs grade >= {RELEVANT_FROM})", items, list(KEEP_NAMES), "nominal",
                         ratings, human_ratings, resamples, seed)
        result.item, result.left_out = "chunk", invalid
        result.unlocated = int(len(decided) - len(located))
        found.append(result)
    return found


def _binary_ratings(chunks: pd.DataFrame, items: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """people (relevant yes/no, NaN where ungraded) + the judge, x items: for alpha."""
    people = chunks[(chunks["source"] == HUMAN) & chunks["relevance"].notna()]
    keys = list(zip(items["question_id"], items["item_id"]))
    rows = []
    for annotator in sorted(people["annotator"].unique()):
        given = people[people["annotator"] == annotator]
        lookup = dict(zip(zip(given["question_id"], given["item_id"]),
                          (given["relevance"].astype(float) >= RELEVANT_FROM).astype(float)))
        rows.append([lookup.get(key, np.nan) for key in keys])
    human = np.array(rows, dtype=float).reshape(len(rows), len(keys))
    return np.vstack([human, items["judge_class"].to_numpy(dtype=float)[None, :]]), human
