"""Run a plan's steps as Ray tasks: chunk sets, then indexes, then (run x shard of questions).

Each shared artefact is built once: one task per chunk set and one per index, and every shard
task of a run waits for its index. A shard task answers its questions with the same code as the
in-process executor (``LocalExecutor.answer_shard`` in a worker's own executor, which keeps its
models, indexes and LLM clients for the worker's later tasks), and returns its rows; only this
process writes the results folder, committing each shard as it arrives. So a Ray run and a local
run of the same experiment write the same tables, and a Ray run killed midway resumes like a
local one: committed shards are kept, the rest are answered again.

A shard task that raises is retried (``max_retries``); after the last try its questions are
error rows for every metric, like a question whose pipeline raised. A backend that is gone stops
the run as it does in-process: the questions answered before it are committed.

Ray is optional (``pip install 'ragkit[ray]'``). Without an address a local Ray is started for
this run and stopped after it; with one (``ray://host:10001`` or ``auto``) the run uses that
cluster, whose workers need ragkit installed and the data and results folders on storage they
all reach.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from ragkit.errors import BackendUnavailable, ConfigError
from ragkit.experiments.answering import ShardInterrupted, shard_questions
from ragkit.experiments.execution_report import ExecutionReport, Progress
from ragkit.experiments.executor import LocalExecutor, PendingRun
from ragkit.experiments.plan import Plan
from ragkit.experiments.rows import failure_scores
from ragkit.results import ResultStore
from ragkit.settings import get_settings

# Environment a worker needs to find the same folders and models as this process.
FORWARDED_ENV = ("RAGKIT_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "OLLAMA_", "PYTHONPATH")
# Retries of a task whose worker died or raised, before its questions become error rows.
TASK_RETRIES = 2


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("the ray executor needs Ray: pip install 'ragkit[ray]' (or run with --executor local)") \
            from None
    return ray


@dataclass
class ShardResult:
    """What a shard task returns: the questions it answered, their rows, and the outage that
    stopped it early (backend, url, message), if any."""

    question_ids: list[str]
    tables: dict[str, pd.DataFrame]
    outage: tuple[str, str, str] | None = None
    cache_keys: dict[str, list[str]] = field(default_factory=dict)  # the worker's, for the folder's record


# One executor per worker process and folder pair: models, indexes and clients load once per worker.
_WORKER_EXECUTORS: dict[tuple[str, str], LocalExecutor] = {}
_WORKER_PIPELINES: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def _worker_executor(derived_dir: str, data_dir: str) -> LocalExecutor:
    key = (derived_dir, data_dir)
    if key not in _WORKER_EXECUTORS:
        # The store is never written by a worker: only the driver commits.
        _WORKER_EXECUTORS[key] = LocalExecutor(Path(derived_dir), ResultStore(Path(tempfile.gettempdir())),
                                               data_dir=Path(data_dir))
    return _WORKER_EXECUTORS[key]


# A plan is passed as (key, [object ref]): a ref inside a list is not resolved by Ray, so each
# worker fetches and unpickles the plan (the whole corpus with it) once, not once per task.
PlanHandle = tuple[str, list[Any]]
_WORKER_PLANS: dict[str, Plan] = {}


def _plan(handle: PlanHandle) -> Plan:
    key, (ref,) = handle
    if key not in _WORKER_PLANS:
        import ray

        _WORKER_PLANS.clear()  # one execution at a time per worker: an earlier plan is done
        _WORKER_PLANS[key] = cast(Plan, ray.get(ref))
    return _WORKER_PLANS[key]


def build_chunkset_task(handle: PlanHandle, chunkset_id: str, derived_dir: str, data_dir: str) -> bool:
    """Build (or find) one chunk set; True when this task built it."""
    plan = _plan(handle)
    executor = _worker_executor(derived_dir, data_dir)
    report = ExecutionReport()
    executor.build_chunkset(plan, chunkset_id, report)
    return report.chunksets_built > 0


def build_index_task(handle: PlanHandle, index_id: str, derived_dir: str, data_dir: str, _chunkset_built: bool) -> dict:
    """Build (or find) one index once its chunk set exists; what it built and embedded."""
    plan = _plan(handle)
    executor = _worker_executor(derived_dir, data_dir)
    report = ExecutionReport()
    step = next(s for s in plan.index_steps if s.index_id == index_id)
    before = executor.built_keys
    executor.open_index(plan, step, report)
    return {"built": report.indexes_built > 0, "embedded": report.chunks_embedded,
            "built_keys": sorted(executor.built_keys - before)}


def answer_shard_task(handle: PlanHandle, run_id: str, question_ids: list[str], derived_dir: str, data_dir: str,
                      _index_ready: dict) -> ShardResult:
    """Answer one shard of one run in this worker, with the in-process executor's code."""
    plan = _plan(handle)
    executor = _worker_executor(derived_dir, data_dir)
    run = next(r for r in plan.runs if r.run_id == run_id)
    step = next(s for s in plan.index_steps if s.index_id == run.index_id)
    key = (derived_dir, data_dir, run_id)
    if key not in _WORKER_PIPELINES:  # a worker's later shards of the same run reuse it
        index = executor.open_index(plan, step, ExecutionReport())
        _WORKER_PIPELINES[key] = (executor.pipeline_for(plan, run, index), executor.evaluator_for(plan, run))
    pipeline, evaluator = _WORKER_PIPELINES[key]
    by_id = plan.questions.by_id()
    questions = [by_id[qid] for qid in question_ids]
    try:
        tables = executor.answer_shard(run, pipeline, questions, evaluator)
    except ShardInterrupted as interrupted:
        cause = interrupted.cause
        return ShardResult([q.id for q in interrupted.answered], interrupted.tables,
                           (cause.backend, cause.url, str(cause)), executor.cache_keys.drain())
    return ShardResult(question_ids, tables, cache_keys=executor.cache_keys.drain())


class RayExecutor(LocalExecutor):
    """Runs a plan on Ray; this process plans, commits and reports, the workers compute."""

    def __init__(self, derived_dir: Path, store: ResultStore, data_dir: Path | None = None,
                 address: str | None = None, num_cpus: int | None = None) -> None:
        super().__init__(derived_dir, store, data_dir)
        self.address = address
        self.num_cpus = num_cpus
        self._ray_temp: str | None = None

    def _connect(self, ray: Any) -> bool:
        """Connect to the cluster (or start a local Ray); True when this process started it."""
        if ray.is_initialized():
            return False
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV)}
        env["RAGKIT_DATA_DIR"] = str(self.data_dir)
        runtime_env = {"env_vars": env}
        if self.address:
            ray.init(address=self.address, runtime_env=runtime_env, log_to_driver=False)
            return True
        # A local Ray for this run only: loopback, no dashboard, a short temp path (Ray's unix
        # sockets live under it and their paths are limited to about 100 characters).
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        self._ray_temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        # Local workers inherit this process's environment, so a runtime_env is needed only when
        # this run's data directory is not the one the environment names; without one, Ray's
        # prestarted workers take the first tasks (about 2 s sooner: a runtime_env starts new ones).
        inherited = get_settings().resolved_data_dir() == self.data_dir.resolve()
        ray.init(num_cpus=self.num_cpus or os.cpu_count() or 1, _node_ip_address="127.0.0.1",
                 _temp_dir=self._ray_temp, include_dashboard=False, log_to_driver=False,
                 **({} if inherited else {"runtime_env": runtime_env}))
        return True

    def compute(self, plan: Plan, progress: Progress) -> ExecutionReport:
        ray = require_ray()
        started_at = time.perf_counter()
        report = ExecutionReport(runs_total=len(plan.runs))
        work = self.start(plan)
        for pending in work:
            progress("questions", pending.committed)
        todo = [pending for pending in work if pending.questions]
        if not todo:
            report.seconds = time.perf_counter() - started_at
            return report
        started_ray = self._connect(ray)
        try:
            self._run_tasks(ray, plan, todo, work, report, progress)
        finally:
            if started_ray:
                ray.shutdown()
                if self._ray_temp is not None:  # the local Ray's sockets and logs, this run's only
                    shutil.rmtree(self._ray_temp, ignore_errors=True)
        report.seconds = time.perf_counter() - started_at
        return report

    def _run_tasks(self, ray: Any, plan: Plan, todo: list[PendingRun], work: list[PendingRun],
                   report: ExecutionReport, progress: Progress) -> None:
        options = {"num_cpus": 1, "max_retries": TASK_RETRIES, "retry_exceptions": True}
        chunk_remote = ray.remote(**options)(build_chunkset_task)
        index_remote = ray.remote(**options)(build_index_task)
        shard_remote = ray.remote(**options)(answer_shard_task)
        plan_ref: PlanHandle = (uuid.uuid4().hex, [ray.put(plan)])
        folders = (str(self.derived_dir), str(self.data_dir))
        report.runs_computed = len(todo)

        index_ids = list(dict.fromkeys(p.run.index_id for p in todo))
        index_steps = {s.index_id: s for s in plan.index_steps}
        chunkset_ids = list(dict.fromkeys(index_steps[i].chunkset_id for i in index_ids))
        chunk_refs = {cid: chunk_remote.remote(plan_ref, cid, *folders) for cid in chunkset_ids}
        index_refs = {iid: index_remote.remote(plan_ref, iid, *folders, chunk_refs[index_steps[iid].chunkset_id])
                      for iid in index_ids}
        shards: dict[Any, tuple[PendingRun, list]] = {}
        for pending in todo:
            for shard in shard_questions(pending.questions, plan.shard_size):
                ref = shard_remote.remote(plan_ref, pending.run.run_id, [q.id for q in shard], *folders,
                                          index_refs[pending.run.index_id])
                shards[ref] = (pending, shard)

        try:
            self._collect(ray, plan, chunk_refs, index_refs, shards, work, report, progress)
        except BaseException:  # a stopped or failed run leaves no task of its own running (also on a cluster)
            for ref in [*chunk_refs.values(), *index_refs.values(), *shards]:
                ray.cancel(ref, force=True)
            raise

    def _collect(self, ray: Any, plan: Plan, chunk_refs: dict[str, Any], index_refs: dict[str, Any],
                 shards: dict[Any, tuple[PendingRun, list]], work: list[PendingRun], report: ExecutionReport,
                 progress: Progress) -> None:
        """Commit each shard as it finishes, whatever else is still running: a run killed while a
        slow index builds keeps every shard finished before. A shard's own builds are recorded
        first (they finished before it started): its run's first commit says whether they were
        built now."""
        builds = {**{ref: (cid, "chunkset") for cid, ref in chunk_refs.items()},
                  **{ref: (iid, "index") for iid, ref in index_refs.items()}}
        recorded: set[Any] = set()

        def record(ref: Any) -> None:
            if ref in recorded:
                return
            recorded.add(ref)
            key, kind = builds[ref]
            if kind == "chunkset":
                if self._get_build(ray, ref, f"chunk set {key}"):
                    self.mark_built([key])
                    report.chunksets_built += 1
                return
            built = self._get_build(ray, ref, f"index {key}")
            self.mark_built(built.get("built_keys", ()))  # the index and its full-text step, if built now
            if built["built"]:
                report.indexes_built += 1
                report.chunks_embedded += built["embedded"]
                progress("embedded", built["embedded"])

        index_chunkset = {s.index_id: s.chunkset_id for s in plan.index_steps}
        waiting = [*builds, *shards]
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            if ready[0] in builds:
                record(ready[0])
                continue
            pending, shard = shards[ready[0]]
            record(chunk_refs[index_chunkset[pending.run.index_id]])
            record(index_refs[pending.run.index_id])
            try:
                result: ShardResult = ray.get(ready[0])
            except Exception as error:  # noqa: BLE001 - a shard that failed every try is error rows
                message = f"failed after {TASK_RETRIES + 1} tries: {_cause(error)}"
                report.errors.append(f"run {pending.run.run_id}: {message}")
                evaluation = pending.run.point.evaluation
                rows = [row for q in shard for row in failure_scores(pending.run, q, message, evaluation)]
                self.commit(plan, pending, shard, {"scores": pd.DataFrame(rows)}, report, progress)
                continue
            answered = [q for q in shard if q.id in set(result.question_ids)]
            self.cache_keys.absorb(result.cache_keys)
            self.commit(plan, pending, answered, result.tables, report, progress)
            if result.outage is not None:
                backend, url, message = result.outage
                outage = BackendUnavailable(message, backend=backend, url=url)
                raise self.run_stopped(plan, sum(p.committed for p in work), outage) from outage

    def _get_build(self, ray: Any, ref: Any, what: str) -> Any:
        """A build task's result; a build that failed every try fails the run, naming it (its
        runs cannot answer anything)."""
        try:
            return ray.get(ref)
        except Exception as error:  # re-raised with the step named
            tries = TASK_RETRIES + 1
            raise RuntimeError(f"building {what} failed after {tries} tries: {_cause(error)}") from error


def _cause(error: BaseException) -> str:
    """The original exception behind a Ray task error, in one line."""
    cause = getattr(error, "cause", None) or error
    return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
