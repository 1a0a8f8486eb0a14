"""Execution is dumb: build the chunk sets and indexes the cache lacks, then answer the
questions each run has not committed yet, one shard at a time.

The building blocks live beside this module, one job each: ``components`` (embedders and LLM
clients shared by the runs), ``builds`` (chunk sets and indexes), ``assembly`` (a run's
pipeline), ``answering`` and ``rows`` (a shard of questions into result rows). This module
orchestrates them: it writes the run and question rows, commits each shard, and offers the Ray
executor (``ray_executor.py``) the same steps as public methods.

A backend that is not there at all is not a question's failure: the run commits the questions
answered before it, writes nothing for the rest and stops with ``RunStopped``; running it again
resumes."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ragkit.caches.keys import CacheKeyLog, embeddings_cache, write_record
from ragkit.errors import BackendUnavailable
from ragkit.experiments.builds import ArtefactBuilds
from ragkit.experiments.components import SharedComponents
from ragkit.experiments.execution_report import ExecutionReport, Progress, no_progress
from ragkit.experiments.plan import IndexStep, Plan, RunStep, run_row
from ragkit.experiments.rows import judgement_row, question_row
from ragkit.questions import Question
from ragkit.results import ResultStore
from ragkit.results.integrity import find_damaged, set_aside
from ragkit.retrievers.cache import RetrievalCache
from ragkit.settings import get_settings

if TYPE_CHECKING:
    from ragkit.artefacts.index import ChunkIndex
    from ragkit.experiments.evaluate import QuestionEvaluator
    from ragkit.pipeline.pipeline import Pipeline

# A plan's end writes merged read copies once the folder has this many parts per table: below it,
# opening the parts is fast anyway and a copy would only cost the plan time and disk.
MERGE_MIN_PARTS = 32


@dataclass
class PendingRun:
    """A run's questions still to answer, how many of its set are committed, and whether its
    run-level rows still have to go with its first shard."""

    run: RunStep
    questions: list[Question]
    committed: int
    needs_run_rows: bool


class RunStopped(BackendUnavailable):
    """A backend went away mid-run. The questions answered before it are committed and no later
    question has a row, so running the same experiment into the same folder again resumes; the
    message says so in one line."""


class LocalExecutor:
    """Runs a plan in this process; heavy components are built once and reused across runs.

    The steps are public so that another executor (Ray) can run them elsewhere with the same
    code: ``build_chunkset``, ``open_index``, ``pipeline_for``, ``evaluator_for``,
    ``answer_shard``; and ``start`` / ``commit`` / ``run_stopped`` on the writing side."""

    def __init__(self, derived_dir: Path, store: ResultStore, data_dir: Path | None = None) -> None:
        self.derived_dir = derived_dir
        self.store = store
        self.data_dir = data_dir or get_settings().resolved_data_dir()
        # The cache keys this process used since its last commit, recorded with each commit.
        self.cache_keys = CacheKeyLog()
        self.components = SharedComponents(self.data_dir, self.cache_keys)
        self.builds = ArtefactBuilds(derived_dir, self.data_dir, self.components)
        self.retrieval_cache = RetrievalCache(self.data_dir / "retrieval_cache", self.cache_keys)

    # The steps, each usable on its own (a Ray worker runs them one task at a time).

    def build_chunkset(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> pd.DataFrame:
        """The chunk set, read or built; ``report.chunksets_built`` counts a build."""
        return self.builds.chunkset(plan, chunkset_id, report)

    def open_index(self, plan: Plan, step: IndexStep, report: ExecutionReport,
                   progress: Progress = no_progress) -> ChunkIndex:
        """The step's index (and its chunk set), read or built; ``report`` counts what was built."""
        return self.builds.index(plan, step, report, progress)

    @property
    def built_keys(self) -> frozenset[str]:
        """Chunk set, index and full-text keys this execution built rather than found cached."""
        return self.builds.built_keys

    def mark_built(self, keys: Iterable[str]) -> None:
        """Count keys another process built for this execution as built (their stage rows then
        say ``cached: False``)."""
        self.builds.mark_built(keys)

    # The pipeline's modules (and LlamaIndex, which its stages use) are imported by the steps that
    # answer questions, so a plan with nothing left to answer never loads them.

    def pipeline_for(self, plan: Plan, run: RunStep, index: ChunkIndex) -> Pipeline:
        from ragkit.experiments.assembly import assemble_pipeline

        return assemble_pipeline(plan, run, index, self.components, self.retrieval_cache, self.data_dir)

    def evaluator_for(self, plan: Plan, run: RunStep) -> QuestionEvaluator | None:
        from ragkit.experiments.assembly import question_evaluator

        return question_evaluator(plan, run, self.components)

    def answer_shard(self, run: RunStep, pipeline: Pipeline, questions: list[Question],
                     evaluator: QuestionEvaluator | None) -> dict[str, pd.DataFrame]:
        """The shard's rows; ShardInterrupted when a backend this process uses went away."""
        from ragkit.experiments.answering import answer_shard

        return answer_shard(run, pipeline, questions, evaluator, self.components.raise_outage)

    def llm_digests(self, run: RunStep) -> dict[str, str]:
        return self.components.llm_digests(run)

    def run_level_tables(self, plan: Plan, run: RunStep, report: ExecutionReport) -> dict[str, pd.DataFrame]:
        """Rows about the run rather than a question (build costs, per-document chunking
        decisions): they go with the run's first committed shard."""
        decisions = [judgement_row(run.run_id, None, row) for row in self.builds.chunk_decisions(plan, run, report)]
        return {"stages": pd.DataFrame(self.builds.build_stage_rows(plan, run)), "judgements": pd.DataFrame(decisions)}

    def serving_pipeline(self, plan: Plan, run: RunStep) -> Pipeline:
        """The run's pipeline, its chunk set and index built or read from the cache, to answer
        questions outside an experiment (``ragkit export-pipeline``'s module); no results written."""
        step = next(s for s in plan.index_steps if s.index_id == run.index_id)
        return self.pipeline_for(plan, run, self.open_index(plan, step, ExecutionReport()))

    # Orchestration: what the folder lacks, answered and committed shard by shard.

    def execute(self, plan: Plan, progress: Progress = no_progress) -> ExecutionReport:
        """Run what the results folder lacks. The folder is locked for the whole run: a second
        writer fails at once (LockTimeout naming this process) instead of interleaving shards.
        Every committed part is checked first; a damaged or missing one is set aside, so its
        questions are answered again (``ExecutionReport.set_aside`` names them)."""
        with self.store.writer_lock():
            # Before the work is planned: a damaged part's questions are then not committed.
            damaged = set_aside(self.store, find_damaged(self.store))
            try:
                report = self.compute(plan, progress)
            finally:  # a run stopped midway measured its calls all the same
                self.components.record_llm_throughput()
            report.set_aside = damaged
            self._merge(report)
            return report

    def _merge(self, report: ExecutionReport) -> None:
        """Write the folder's merged read copies (ragkit.results.copy_writer): one file per table for readers of
        the whole folder instead of one per run. Every row is committed by now and a copy is only
        a faster read, so a copy that cannot be written is a warning, not a failed run."""
        import pyarrow as pa

        try:
            self.store.merge(min_parts=MERGE_MIN_PARTS)
        except (OSError, pa.ArrowException) as error:
            message = f"merged read copies not written ({error}); the results are complete, reads open every part"
            logging.getLogger(__name__).warning(message)
            report.errors.append(message)

    def start(self, plan: Plan) -> list[PendingRun]:
        """Write the runs and questions rows; return what each run has left to answer.

        Results are keyed per (run, question content): a run answers the questions of this set
        it has not answered at their current content, whatever set it answered before."""
        for run in plan.runs:
            self.store.write_run(run.run_id, {**run_row(plan, run), **self.llm_digests(run)})
        self.store.write_baselines(plan.baselines, plan.first_levels)
        questions = pd.DataFrame([question_row(q) for q in plan.questions.questions])
        self.store.write_questions(plan.questions_key, questions)
        done = self.store.completed_keys()
        keys = {q.id: q.content_key() for q in plan.questions.questions}
        work = []
        for run in plan.runs:
            finished = done.get(run.run_id, set())
            pending = [q for q in plan.questions.questions if (q.id, keys[q.id]) not in finished]
            committed = sum(1 for pair in keys.items() if pair in finished)
            work.append(PendingRun(run, pending, committed, needs_run_rows=not finished))
        if any(p.questions and not p.needs_run_rows for p in work):
            # A run resumed midway: the part that carried its run-level rows may have been set
            # aside (damaged) since; read only then, as markers say which part carries them.
            carried = self.store.runs_with_run_rows()
            for p in work:
                p.needs_run_rows = p.run.run_id not in carried
        # A run killed between its last commit and its compaction has nothing left to answer: its
        # compaction is finished here, so the folder ends as an uninterrupted run leaves it.
        self.store.finish_compactions({p.run.run_id for p in work if not p.questions})
        return work

    def commit(self, plan: Plan, pending: PendingRun, answered: list[Question], tables: dict[str, pd.DataFrame],
               report: ExecutionReport, progress: Progress) -> None:
        """Commit one shard's rows; the run's first shard also carries its run-level rows. The
        cache keys used since the last commit are recorded first (``ragkit.caches.keys``): a crash
        between the two keeps a few keys too many, never too few."""
        if not answered:
            return
        carries_run_rows = pending.needs_run_rows
        if pending.needs_run_rows:
            run_rows = self.run_level_tables(plan, pending.run, report)
            tables = {**tables, **{name: _concat(frame, tables.get(name, pd.DataFrame()))
                                   for name, frame in run_rows.items()}}
            vectors = self.builds.embedding_keys(plan, pending.run, report)
            if vectors is not None:
                self.cache_keys.note_many(embeddings_cache(vectors[0]), vectors[1])
            pending.needs_run_rows = False
        write_record(self.store, pending.run.run_id, self.cache_keys.drain())
        self.store.commit_shard(pending.run.run_id, [q.id for q in answered], tables,
                                [q.content_key() for q in answered], run_rows=carries_run_rows)
        pending.committed += len(answered)
        report.questions_computed += len(answered)
        progress("questions", len(answered))
        if pending.committed == len(plan.questions.questions):
            # Finished: one part per table for the run, so readers open one file per run, not per shard.
            self.store.compact_run(pending.run.run_id)

    def compute(self, plan: Plan, progress: Progress) -> ExecutionReport:
        """Build and answer what the folder lacks, in this process (the Ray executor overrides
        this with tasks); called by ``execute`` under the folder's writer lock."""
        started = time.perf_counter()
        report = ExecutionReport(runs_total=len(plan.runs))
        work = self.start(plan)
        index_steps = {s.index_id: s for s in plan.index_steps}
        for pending in work:
            progress("questions", pending.committed)
            if not pending.questions:
                continue
            from ragkit.experiments.answering import ShardInterrupted, shard_questions

            run = pending.run
            report.runs_computed += 1
            index = self.open_index(plan, index_steps[run.index_id], report, progress)
            pipeline = self.pipeline_for(plan, run, index)
            evaluator = self.evaluator_for(plan, run)
            for shard in shard_questions(pending.questions, plan.shard_size):
                answered: list[Question] = shard
                outage: BackendUnavailable | None = None
                try:
                    tables = self.answer_shard(run, pipeline, shard, evaluator)
                except ShardInterrupted as interrupted:
                    answered, tables, outage = interrupted.answered, interrupted.tables, interrupted.cause
                self.commit(plan, pending, answered, tables, report, progress)
                if outage is not None:
                    raise self.run_stopped(plan, sum(p.committed for p in work), outage) from outage
        report.seconds = time.perf_counter() - started
        return report

    def run_stopped(self, plan: Plan, committed: int, outage: BackendUnavailable) -> RunStopped:
        """The one-line stop for a backend that went away, with how much of the plan is committed."""
        total = len(plan.runs) * len(plan.questions.questions)
        return RunStopped(
            f"stopped: the {outage.backend} backend at {outage.url} is unreachable; {committed} of {total} "
            f"questions ({len(plan.runs)} run(s) x {len(plan.questions.questions)}) are committed in "
            f"{self.store.root}; start it and run the same experiment again to resume",
            backend=outage.backend, url=outage.url,
        )


def _concat(*frames: pd.DataFrame) -> pd.DataFrame:
    non_empty = [frame for frame in frames if not frame.empty]
    return pd.concat(non_empty, ignore_index=True) if non_empty else pd.DataFrame()
