"""Answering questions: a shard of a run's questions through its pipeline and evaluation, into
result rows. The same code answers in-process and in a Ray worker.

A question whose pipeline raises is a row per metric with its error; a backend that is not there
at all is not a question's failure: it stops the shard, and ``ShardInterrupted`` carries the rows
of the questions answered before it so the caller can commit them."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ragkit.errors import BackendUnavailable
from ragkit.experiments.evaluate import QuestionEvaluator
from ragkit.experiments.plan import RunStep
from ragkit.experiments.rows import evaluation_names, failure_scores, question_rows
from ragkit.pipeline.pipeline import Pipeline
from ragkit.questions import Question

TABLES = ("scores", "retrievals", "stages", "judgements", "answers")


class ShardInterrupted(Exception):
    """A backend went away during a shard: the questions answered before it, with their rows."""

    def __init__(self, answered: list[Question], tables: dict[str, pd.DataFrame], cause: BackendUnavailable) -> None:
        super().__init__(str(cause))
        self.answered = answered
        self.tables = tables
        self.cause = cause


def shard_questions(items: list[Question], size: int) -> list[list[Question]]:
    """``items`` in consecutive shards of ``size`` (the last may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def answer_shard(run: RunStep, pipeline: Pipeline, questions: list[Question],
                 evaluator: QuestionEvaluator | None = None,
                 stop_if_unreachable: Callable[[], None] = lambda: None) -> dict[str, pd.DataFrame]:
    """The shard's rows. ``stop_if_unreachable`` runs after each question and raises
    BackendUnavailable if a backend went away during it; that question then has no rows, and
    ShardInterrupted carries the rows of the questions before it."""
    tables: dict[str, list[dict]] = {name: [] for name in TABLES}
    for number, question in enumerate(questions):
        try:
            rows = _answer_question(run, pipeline, question, evaluator)
            stop_if_unreachable()
        except BackendUnavailable as outage:
            raise ShardInterrupted(questions[:number], _frames(tables), outage) from outage
        for name, part in rows.items():
            tables[name].extend(part)
    return _frames(tables)


def _frames(tables: dict[str, list[dict]]) -> dict[str, pd.DataFrame]:
    return {name: pd.DataFrame(rows) for name, rows in tables.items()}


def question_documents(question: Question) -> list[str]:
    """The documents a question is about (its relevant ones, graded above 0): its scope."""
    return [doc_id for doc_id, grade in question.relevant_docs.items() if grade > 0]


def _answer_question(run: RunStep, pipeline: Pipeline, question: Question,
                     evaluator: QuestionEvaluator | None) -> dict[str, list[dict]]:
    try:
        trace = pipeline.answer(question.text, history=question.history, scope=question_documents(question),
                                documents=question.documents)
    except BackendUnavailable:
        raise  # says nothing about this configuration: the run stops instead
    except Exception as error:  # noqa: BLE001 - one failing question is a row per metric with its error, not a lost run
        params = evaluator.params if evaluator is not None else None
        return {"scores": failure_scores(run, question, f"{type(error).__name__}: {error}", params)}
    tables = question_rows(run, question, trace)
    if evaluator is not None:
        keys = {"run_id": run.run_id, "question_id": question.id}
        try:
            scores, stages = evaluator(question, trace)
        except BackendUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - a crashing metric library costs the metrics, not the answer
            message = f"{type(error).__name__}: {error}"
            scores = [{"metric": name, "value": math.nan, "error": message}
                      for name in evaluation_names(evaluator.params)]
            stages = []
        tables["scores"] += [{**keys, **row} for row in scores]
        tables["stages"] += [{**keys, **row} for row in stages]
    return tables
