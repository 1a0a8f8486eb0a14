"""Pooling: the candidates several runs retrieved for each question, gathered once for labelling.

A question's pool is the union of the given runs' top-k chunks (the ``retrievals`` table), each
chunk once, plus each run's generated answer (the ``answers`` table). A chunk is identified by
its span (doc_id, start_char, end_char), not its chunk id: ground truth survives re-chunking, and
two runs that share a chunker share their chunks' items. Items are shown in a random order drawn
from a recorded seed (per question), so neither the runs' order nor their ranks show, and the
configuration is hidden: the pool records which runs found an item (for the metrics computed
from labels later), but the labelling page and sheet never show it.

The pool is one JSON file in the results folder (``labels/pools/<pool_id>.json``), written
atomically; its id is a content key of the runs, k, seed and items, so the same pool built twice
has the same id.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC, datetime

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import ConfigError
from ragkit.hashing import content_key

POOLS_FOLDER = "labels/pools"


class PoolParams(BaseModel):
    """What to pool: which runs, how deep, and the seed of the shown order."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str] = Field(min_length=1, description="Run ids whose candidates are pooled.")
    k: int = Field(default=10, ge=1, le=1000, description="Top-k chunks of each run per question.")
    seed: int = Field(default=0, ge=0, description="Seed of the random order items are shown in (recorded).")
    questions: list[str] | None = Field(default=None, description="Question ids to pool (default: every one).")


class PoolChunk(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    doc_id: str
    start_char: int
    end_char: int
    text: str | None = Field(default=None, description="The span's text, when the corpus was given.")
    runs: list[str] = Field(description="Runs that retrieved it in their top k: hidden from the annotator.")


class PoolAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    run_id: str = Field(description="The run that wrote it: hidden from the annotator.")
    answer: str


class PoolQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    text: str
    document: str = Field(description="The question's source document: the resampling unit of agreement CIs.")
    chunks: list[PoolChunk] = Field(description="Each chunk once, in the shown (shuffled) order.")
    answers: list[PoolAnswer] = Field(default_factory=list, description="One per run that answered, shuffled.")


class Pool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pool_id: str
    runs: list[str]
    k: int
    seed: int
    created: str
    questions: list[PoolQuestion]

    def chunk_count(self) -> int:
        return sum(len(question.chunks) for question in self.questions)

    def answer_count(self) -> int:
        return sum(len(question.answers) for question in self.questions)


def chunk_item_id(question_id: str, doc_id: str, start: int, end: int) -> str:
    """A chunk's item id within a question: by span, so every chunker's equal span is one item."""
    return content_key("pool-chunk", question_id, doc_id, int(start), int(end))


def answer_item_id(question_id: str, run_id: str) -> str:
    """An answer's item id: opaque, so the id does not name the configuration."""
    return content_key("pool-answer", question_id, run_id)


def build_pool(params: PoolParams, retrievals: pd.DataFrame, questions: pd.DataFrame,
               answers: pd.DataFrame | None = None, texts: Mapping[str, str] | None = None,
               created: str | None = None) -> Pool:
    """The pool of ``params.runs`` from a results folder's tables.

    ``retrievals``: run_id, question_id, rank (1-based), doc_id, start_char, end_char;
    ``questions``: question_id, text, document; ``answers``: run_id, question_id, answer, valid;
    ``texts``: doc_id -> document text, to put each span's text in the pool."""
    known = set(retrievals["run_id"].astype(str))
    missing = [run for run in params.runs if run not in known]
    if missing:
        raise ConfigError(f"run(s) without retrievals in these results: {', '.join(missing)}. "
                          f"Valid runs: {', '.join(sorted(known)) or '(none)'}")
    top = retrievals[retrievals["run_id"].isin(params.runs) & (retrievals["rank"] <= params.k)]
    if params.questions is not None:
        top = top[top["question_id"].isin(params.questions)]
    top = top.sort_values(["question_id", "run_id", "rank"], kind="stable")
    info = questions.drop_duplicates("question_id").set_index("question_id")
    answered = _answers_by_question(answers, params.runs)
    pooled = []
    for question_id, rows in top.groupby("question_id", sort=True):
        question_id = str(question_id)
        found: dict[tuple[str, int, int], list[str]] = {}
        for row in rows.itertuples(index=False):
            runs = found.setdefault((str(row.doc_id), int(row.start_char), int(row.end_char)), [])
            if row.run_id not in runs:
                runs.append(str(row.run_id))
        chunks = [PoolChunk(item_id=chunk_item_id(question_id, doc, start, end), doc_id=doc, start_char=start,
                            end_char=end, text=_span_text(texts, doc, start, end), runs=sorted(runs))
                  for (doc, start, end), runs in found.items()]
        replies = [PoolAnswer(item_id=answer_item_id(question_id, run), run_id=run, answer=text)
                   for run, text in answered.get(question_id, [])]
        # One generator per question, seeded by the pool's seed and the question: the order of a
        # question does not change when other questions are added to the pool.
        shuffler = random.Random(content_key("pool-order", params.seed, question_id))
        shuffler.shuffle(chunks)
        shuffler.shuffle(replies)
        text = str(info.at[question_id, "text"]) if question_id in info.index else ""
        document = info.at[question_id, "document"] if question_id in info.index else None
        pooled.append(PoolQuestion(question_id=question_id, text=text,
                                   document=str(document) if document is not None and not pd.isna(document)
                                   else question_id, chunks=chunks, answers=replies))
    if not pooled:
        raise ConfigError(f"nothing to pool: runs {', '.join(params.runs)} retrieved no chunks"
                          + (" for the given questions" if params.questions is not None else ""))
    body = {"runs": sorted(params.runs), "k": params.k, "seed": params.seed,
            "questions": [question.model_dump(mode="json") for question in pooled]}
    return Pool(pool_id=content_key("pool", body, length=12), runs=sorted(params.runs), k=params.k,
                seed=params.seed, created=created or datetime.now(UTC).isoformat(timespec="seconds"),
                questions=pooled)


def _answers_by_question(answers: pd.DataFrame | None, runs: list[str]) -> dict[str, list[tuple[str, str]]]:
    """question id -> (run id, answer) of the runs' valid, non-empty answers, runs in name order."""
    if answers is None or answers.empty:
        return {}
    chosen = answers[answers["run_id"].isin(runs) & answers["answer"].notna()]
    if "valid" in chosen.columns:
        chosen = chosen[chosen["valid"].fillna(False).astype(bool)]
    found: dict[str, list[tuple[str, str]]] = {}
    for row in chosen.sort_values(["question_id", "run_id"]).itertuples(index=False):
        if str(row.answer).strip():
            found.setdefault(str(row.question_id), []).append((str(row.run_id), str(row.answer)))
    return found


def _span_text(texts: Mapping[str, str] | None, doc_id: str, start: int, end: int) -> str | None:
    if texts is None or doc_id not in texts:
        return None
    return texts[doc_id][start:end]
