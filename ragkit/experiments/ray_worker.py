"""The Ray executor's worker: one actor per CPU that stays up for a whole execution.

An actor holds what a task would otherwise load again: ragkit's imports, the plan (the whole
corpus with it, fetched from the object store once), the in-process executor's heavy components
(embedders, LLM clients), its opened indexes and each run's pipeline. The driver
(``ray_executor.py``) gives it one step at a time, each with the in-process executor's code:
a chunk set, one window of a chunk set embedded into the embedding cache (``embed_window``:
the windows of one index embedded by several workers at once, ``ragkit.artefacts.window_embedding``), an
index, the plan's query vectors of one embedder, a shard of one run's questions.

The plan's questions are embedded once per embedder for the whole execution
(``query_vectors``) and every worker that answers a run with that embedder is handed the same
vectors (``answer_shard``'s ``shared``), so no other worker loads the model for its queries.
A worker never writes the results folder: only the driver commits.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.artefacts.chunksets import chunkset_path
from ragkit.artefacts.window_embedding import embed_window, window_count
from ragkit.embedders.base import embedders
from ragkit.embedders.cache import EmbeddingCache
from ragkit.experiments.answering import ShardInterrupted
from ragkit.experiments.execution_report import ExecutionReport
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.plan import IndexStep, Plan, RunStep, component_key
from ragkit.experiments.throughput import record_throughput
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from ragkit.storage.locks import content_lock


@dataclass
class ShardResult:
    """What a shard returns: the questions it answered, their rows, and the outage that stopped
    it early (backend, url, message), if any."""

    question_ids: list[str]
    tables: dict[str, pd.DataFrame]
    outage: tuple[str, str, str] | None = None
    cache_keys: dict[str, list[str]] = field(default_factory=dict)  # the worker's, for the folder's record


@dataclass
class QueryVectors:
    """One embedder's vectors of the plan's question texts and what each cost to embed (its share
    of the batch): what ``Embedder.share_query_vectors`` takes."""

    texts: list[str]
    vectors: np.ndarray
    shares: list[float]


class PlanWorker:
    """One execution's worker (a Ray actor): the plan, its folders and the loaded components."""

    def __init__(self, derived_dir: str, data_dir: str) -> None:
        # The store is never written by a worker (only the driver commits): a throwaway folder.
        self.executor = LocalExecutor(Path(derived_dir), ResultStore(Path(tempfile.gettempdir())),
                                      data_dir=Path(data_dir))
        self.plan: Plan | None = None
        self._runs: dict[str, RunStep] = {}
        self._steps: dict[str, IndexStep] = {}
        self._pipelines: dict[str, tuple[Any, Any]] = {}
        self._shared: set[str] = set()  # embedders whose shared query vectors this worker holds
        self._steps_run = 0
        self._shards_answered = 0
        self._windows: list[tuple[str, int]] = []  # (index id, window number) of each window embedded here

    def _fetch(self, plan_ref: list[Any]) -> Plan:
        """The plan, fetched from the object store on this worker's first step (and again after
        a restart). It comes with every step as ``[object ref]``, a ref Ray does not resolve: as
        a constructor argument Ray would keep it for restarts and warn about that on every run."""
        if self.plan is None:
            import ray

            self.plan = ray.get(plan_ref[0])
            self._runs = {run.run_id: run for run in self.plan.runs}
            self._steps = {step.index_id: step for step in self.plan.index_steps}
        return self.plan

    def build_chunkset(self, plan_ref: list[Any], chunkset_id: str, window_rows: int) -> dict:
        """Build (or find) one chunk set: whether this call built it, and how many windows of
        ``window_rows`` (the driver's setting, not this worker's) a streamed index build of it
        embeds (1 when its index is built whole: nothing to share).
        Its file only, as the in-process executor's index build reads it: a frame held here
        would make this worker build the index from the whole frame, in other batches."""
        self._steps_run += 1
        plan = self._fetch(plan_ref)
        report = ExecutionReport()
        path = self.executor.builds.chunkset_file(plan, chunkset_id, report)
        settings = get_settings()
        streamed = window_rows and chunkset_id not in self.executor.builds.loaded_chunksets
        # With shared artefacts an index may be fetched, not built: embedding its windows first would be waste.
        windows = window_count(path, window_rows) if streamed and not settings.shared_artefacts else 1
        return {"built": report.chunksets_built > 0, "windows": windows}

    def embed_window(self, plan_ref: list[Any], index_id: str, number: int, window_rows: int) -> dict:
        """Embed window ``number`` (of ``window_rows``, the driver's setting: this worker's own
        environment may say another) of the chunk set of ``index_id`` with its embedder into the
        embedding cache (``ragkit.artefacts.window_embedding``); the vectors it added and its seconds."""
        self._steps_run += 1
        self._fetch(plan_ref)
        self._windows.append((index_id, number))
        step = self._steps[index_id]
        spec = step.embedder
        if spec is None:  # the driver adds window steps only for indexes with an embedder
            raise ValueError(f"index {index_id} has no embedder")
        embedder_key = component_key(embedders, spec)
        data_dir = self.executor.data_dir
        added, seconds = embed_window(
            self.executor.components.embedder(spec),
            chunkset_path(self.executor.derived_dir, step.chunkset_id), window_rows, number,
            EmbeddingCache(data_dir / "embeddings", embedder_key), get_settings().embed_batch_size,
            content_lock(data_dir, "embedder", embedder_key))
        record_throughput(data_dir, "embedders", embedder_key, spec.type, added, seconds)
        return {"embedded": added, "seconds": seconds}

    def build_index(self, plan_ref: list[Any], index_id: str, compact: bool = False,
                    window_seconds: float = 0.0) -> dict:
        """Build (or find) one index once its chunk set exists; what it built and embedded.
        ``compact``: its vectors were appended by window steps, whose many small commits the
        cache merges first (a build that embeds nothing itself would not). ``window_seconds``:
        those steps' seconds summed, counted in the index's "embed" stage row with its own."""
        self._steps_run += 1
        plan = self._fetch(plan_ref)
        report = ExecutionReport()
        before = self.executor.built_keys
        step = self._steps[index_id]
        if compact and step.embedder is not None:
            embedder_key = component_key(embedders, step.embedder)
            with content_lock(self.executor.data_dir, "embedder", embedder_key):
                EmbeddingCache(self.executor.data_dir / "embeddings", embedder_key).compact()
        if window_seconds:
            self.executor.builds.embedded_before[index_id] = window_seconds
        self.executor.open_index(plan, step, report)
        self.executor.builds.embedded_before.pop(index_id, None)  # found built: nothing to charge
        return {"built": report.indexes_built > 0, "embedded": report.chunks_embedded,
                "built_keys": sorted(self.executor.built_keys - before)}

    def query_vectors(self, plan_ref: list[Any], run_id: str) -> QueryVectors:
        """The plan's question texts embedded by the run's embedder, in one batch, as a run of
        the in-process executor embeds them on its first search (``Embedder.expect_queries``)."""
        self._steps_run += 1
        plan = self._fetch(plan_ref)
        embedder = self._embedder(self._runs[run_id])
        texts = list(dict.fromkeys(q.text for q in plan.questions.questions))
        embedder.expect_queries(texts)
        embedder.embed_query(texts[0])
        embedder.drain_adjustment()  # no question was asked: no search may be charged this batch
        vectors, shares = embedder.held_query_vectors(texts)
        return QueryVectors(texts, vectors, shares)

    def answer_shard(self, plan_ref: list[Any], run_id: str, question_ids: list[str], shared: list[Any]) -> ShardResult:
        """Answer one shard of one run with the in-process executor's code. ``plan_ref``: see
        ``_fetch``. ``shared``: the run's
        embedder's query vectors as ``[object ref]`` (a ref inside a list is not resolved by Ray,
        so a worker fetches them once, not with every shard), or ``[]``."""
        self._steps_run += 1
        plan = self._fetch(plan_ref)
        self._shards_answered += 1
        run = self._runs[run_id]
        if shared:
            self._take_shared(run, shared[0])
        if run_id not in self._pipelines:  # a worker's later shards of the same run reuse it
            index = self.executor.open_index(plan, self._steps[run.index_id], ExecutionReport())
            self._pipelines[run_id] = (self.executor.pipeline_for(plan, run, index),
                                       self.executor.evaluator_for(plan, run))
        pipeline, evaluator = self._pipelines[run_id]
        by_id = plan.questions.by_id()
        questions = [by_id[qid] for qid in question_ids]
        try:
            tables = self.executor.answer_shard(run, pipeline, questions, evaluator)
        except ShardInterrupted as interrupted:
            cause = interrupted.cause
            return ShardResult([q.id for q in interrupted.answered], interrupted.tables,
                               (cause.backend, cause.url, str(cause)), self.executor.cache_keys.drain())
        return ShardResult(question_ids, tables, cache_keys=self.executor.cache_keys.drain())

    def stats(self) -> dict:
        """Who this worker is and what it did: its process and node, the steps and shards it ran and
        the windows it embedded, and the query batches its embedders embedded themselves (the
        shared ones are not counted)."""
        import ray

        loaded = self.executor.components.embedders()
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(), "steps": self._steps_run,
                "shards": self._shards_answered,
                "windows": list(self._windows),
                "query_batches": sum(embedder.query_batches for embedder in loaded)}

    def _embedder(self, run: RunStep) -> Any:
        if run.point.embedder is None:
            raise ValueError(f"run {run.run_id} has no embedder")
        return self.executor.components.embedder(run.point.embedder)

    def _take_shared(self, run: RunStep, ref: Any) -> None:
        key = str(component_key(embedders, run.point.embedder))
        if key in self._shared:
            return
        import ray

        shared: QueryVectors = ray.get(ref)
        self._embedder(run).share_query_vectors(shared.texts, shared.vectors, shared.shares)
        self._shared.add(key)
