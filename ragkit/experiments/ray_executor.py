"""Run a plan on Ray: persistent workers (one actor per CPU) given the plan's steps one at a time.

The steps: each chunk set and each index once, the plan's question texts once per embedder,
then every (run x shard of questions). A chunk set a streamed build cuts into more than one
window (``RAGKIT_BUILD_WINDOW_ROWS``) adds, once it is built, one ``embed`` step per window and
embedder of the indexes still to build on it (``ragkit.artefacts.window_embedding``): the windows are
embedded by several workers at once into the embedding cache, and the index steps of that
(chunk set, embedder) pair, which wait for all of them, find every vector there. The vectors
are the ones the in-process build computes (same texts in the same batches per window), and
``chunks_embedded`` counts each vector once, as in-process. The index's "embed" stage row counts
the window steps' seconds (summed over workers: CPU-side time, not wall) with the index step's own
lookups, as the in-process row counts the whole embedding. A chunk set of one window keeps its
single index step. A worker (``ray_worker.PlanWorker``) stays up for the
whole execution, so ragkit's imports, the plan, the models, the opened indexes and each run's
pipeline load once per worker, not once per task; the query vectors are computed by one worker
and handed to the others through the object store. The driver decides what runs where
(``ray_schedule.Dispatcher``): a step goes to a free worker once what it needs is done. A shard
is answered with the same code as the in-process executor (``LocalExecutor.answer_shard`` in
the worker's own executor) and returns its rows; only this process writes the results folder,
committing each shard as it arrives. So a Ray run and a local run of the same experiment write
the same tables, and a Ray run killed midway resumes like a local one: committed shards are
kept, the rest are answered again.

A step that raises (or whose worker died: a worker is restarted) is tried again; after the last
try a shard's questions are error rows for every metric, like a question whose pipeline raised,
and a failed build stops the run naming it. A backend that is gone stops the run as it does
in-process: the questions answered before it are committed.

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
from collections.abc import Hashable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, cast

import pandas as pd

from ragkit.artefacts.index import IndexStore
from ragkit.embedders.base import embedders
from ragkit.errors import BackendUnavailable, ConfigError
from ragkit.experiments.answering import shard_questions
from ragkit.experiments.execution_report import ExecutionReport, Progress
from ragkit.experiments.executor import LocalExecutor, PendingRun
from ragkit.experiments.plan import Plan, component_key
from ragkit.experiments.ray_schedule import Dispatcher, Failed, Result, Step
from ragkit.experiments.ray_worker import PlanWorker, ShardResult
from ragkit.experiments.rows import failure_scores
from ragkit.questions import Question
from ragkit.results import ResultStore
from ragkit.settings import get_settings

# Environment a worker needs to find the same folders and models as this process.
FORWARDED_ENV = ("RAGKIT_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "OLLAMA_", "PYTHONPATH")
# Retries of a step whose worker died or raised, before its questions become error rows.
TASK_RETRIES = 2


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("the ray executor needs Ray: pip install 'ragkit[ray]' (or run with --executor local)") \
            from None
    return ray


@contextmanager
def _ray_starting(ray: Any, where: str, temp_dir: str | None) -> Iterator[None]:
    """A Ray that does not start or answer is a backend that is not there (``BackendUnavailable``:
    exit 3, nothing computed is lost, the same command resumes), not a bug in ragkit: a local node
    can time out starting on a busy machine ("The current node timed out during startup"), a
    cluster's address can be wrong or down. What it started, and its temp folder, go with it."""
    try:
        yield
    except Exception as error:  # Ray raises plain Exception, ConnectionError, RuntimeError
        # The processes a half-started node left behind; the start's error is the one to report.
        with suppress(Exception):
            ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BackendUnavailable(
            f"Ray did not start ({where}): {first}; what ran is kept: run the same command again to "
            "resume, or with --executor local", backend="ray", url=where) from error


class RayExecutor(LocalExecutor):
    """Runs a plan on Ray; this process plans, commits and reports, the workers compute."""

    def __init__(self, derived_dir: Path, store: ResultStore, data_dir: Path | None = None,
                 address: str | None = None, num_cpus: int | None = None) -> None:
        super().__init__(derived_dir, store, data_dir)
        self.address = address
        self.num_cpus = num_cpus
        self._ray_temp: str | None = None
        self.worker_stats: list[dict] = []  # each worker's ``PlanWorker.stats`` after the last execution

    def _connect(self, ray: Any) -> bool:
        """Connect to the cluster (or start a local Ray); True when this process started it."""
        if ray.is_initialized():
            return False
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV)}
        env["RAGKIT_DATA_DIR"] = str(self.data_dir)
        runtime_env = {"env_vars": env}
        if self.address:
            with _ray_starting(ray, f"the cluster at {self.address}", None):
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
        with _ray_starting(ray, "a local Ray on 127.0.0.1", self._ray_temp):
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
        """Start one worker per CPU of the cluster (no more than there are steps), hand them the
        plan's steps and commit each shard as it comes back; end the workers after."""
        report.runs_computed = len(todo)
        shards: dict[Hashable, tuple[PendingRun, list[Question]]] = {}
        # The driver's window size, handed to the workers with the steps: a worker's own environment
        # (a Ray started before the variable was set, a remote cluster) must not cut other windows.
        steps = plan_steps(plan, todo, shards, get_settings().build_window_rows)
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        actor = ray.remote(num_cpus=1, max_restarts=TASK_RETRIES)(PlanWorker)
        plan_ref = ray.put(plan)  # fetched once per worker, on its first step (PlanWorker._fetch)
        count = max(1, min(cpus, len(steps)))
        workers = [actor.remote(str(self.derived_dir), str(self.data_dir)) for _ in range(count)]
        dispatcher = Dispatcher(ray, workers, steps, TASK_RETRIES, leading=([plan_ref],),
                                expand=WindowSteps(plan, steps, IndexStore(self.derived_dir / "lancedb")))
        try:
            self._collect(dispatcher, plan, shards, work, report, progress)
            self.worker_stats = ray.get([worker.stats.remote() for worker in workers])
        finally:  # a stopped or failed run leaves nothing of its own running (also on a cluster)
            dispatcher.stop()

    def _collect(self, dispatcher: Dispatcher, plan: Plan, shards: dict[Hashable, tuple[PendingRun, list[Question]]],
                 work: list[PendingRun], report: ExecutionReport, progress: Progress) -> None:
        """Record each build and commit each shard as it finishes, whatever else is still
        running: a run killed while a slow index builds keeps every shard finished before. A
        build is given back before any shard that needs it is handed out, so its run's first
        commit says whether it was built now."""
        for step, outcome in dispatcher.results():
            kind, name = cast(tuple, step.key)[:2]
            if kind in ("chunkset", "embed", "index", "queries") and isinstance(outcome, Failed):
                what = {"chunkset": "chunk set", "embed": "the vectors of chunk set", "index": "index",
                        "queries": "the query vectors of"}[kind]
                raise RuntimeError(f"building {what} {name} failed after {TASK_RETRIES + 1} tries: "
                                   f"{_cause(outcome.error)}") from outcome.error
            if kind == "chunkset":
                if outcome["built"]:
                    self.mark_built([name])
                    report.chunksets_built += 1
            elif kind == "embed":
                report.chunks_embedded += outcome["embedded"]
                progress("embedded", outcome["embedded"])
            elif kind == "index":
                self.mark_built(outcome.get("built_keys", ()))  # the index and its full-text step, if built now
                if outcome["built"]:
                    report.indexes_built += 1
                    report.chunks_embedded += outcome["embedded"]
                    progress("embedded", outcome["embedded"])
            elif kind == "shard":
                self._commit_shard(plan, *shards[step.key], outcome, work, report, progress)

    def _commit_shard(self, plan: Plan, pending: PendingRun, shard: list[Question], outcome: Any,
                      work: list[PendingRun], report: ExecutionReport, progress: Progress) -> None:
        """A shard's rows committed; a shard that failed every try is error rows for each metric,
        like a question whose pipeline raised; a backend gone stops the run."""
        if isinstance(outcome, Failed):
            message = f"failed after {TASK_RETRIES + 1} tries: {_cause(outcome.error)}"
            report.errors.append(f"run {pending.run.run_id}: {message}")
            evaluation = pending.run.point.evaluation
            rows = [row for q in shard for row in failure_scores(pending.run, q, message, evaluation)]
            self.commit(plan, pending, shard, {"scores": pd.DataFrame(rows)}, report, progress)
            return
        result: ShardResult = outcome
        answered = [q for q in shard if q.id in set(result.question_ids)]
        self.cache_keys.absorb(result.cache_keys)
        self.commit(plan, pending, answered, result.tables, report, progress)
        if result.outage is not None:
            backend, url, message = result.outage
            outage = BackendUnavailable(message, backend=backend, url=url)
            raise self.run_stopped(plan, sum(p.committed for p in work), outage) from outage


def plan_steps(plan: Plan, todo: list[PendingRun],
               shards: dict[Hashable, tuple[PendingRun, list[Question]]], window_rows: int = 0) -> list[Step]:
    """The steps of what ``todo`` lacks, builds first: each chunk set and index once, the
    question texts once per embedder, then every (run, shard of questions); ``shards`` gets
    what each shard step answers. ``window_rows``: the driver's streamed-build window, with
    which a chunk set step counts its windows (and its window steps cut them)."""
    index_steps = {s.index_id: s for s in plan.index_steps}
    index_ids = list(dict.fromkeys(p.run.index_id for p in todo))
    chunkset_ids = list(dict.fromkeys(index_steps[i].chunkset_id for i in index_ids))
    steps = [Step(("chunkset", cid), "build_chunkset", (cid, window_rows)) for cid in chunkset_ids]
    query_keys: dict[str, str] = {}  # embedder key -> the first run using it
    for pending in todo:
        if pending.run.point.embedder is not None:
            query_keys.setdefault(component_key(embedders, pending.run.point.embedder), pending.run.run_id)
    steps += [Step(("queries", key), "query_vectors", (run_id,)) for key, run_id in query_keys.items()]
    steps += [Step(("index", iid), "build_index", (iid,), (("chunkset", index_steps[iid].chunkset_id),))
              for iid in index_ids]
    for pending in todo:
        run = pending.run
        embedder = component_key(embedders, run.point.embedder)
        needs = (("index", run.index_id), *((("queries", embedder),) if embedder else ()))
        shared: Any = Result(("queries", embedder)) if embedder else []
        for number, shard in enumerate(shard_questions(pending.questions, plan.shard_size)):
            key = ("shard", run.run_id, number)
            steps.append(Step(key, "answer_shard", (run.run_id, [q.id for q in shard], shared), needs))
            shards[key] = (pending, shard)
    return steps

class WindowSteps:
    """The dispatcher's ``expand``: once a chunk set is built, one ``embed`` step per window of it
    and embedder of its indexes still to build, when it has more than one window; each index step
    of that (chunk set, embedder) pair then waits for all of them and compacts the cache first.
    Two indexes of one pair (exact and ANN) share the window steps."""

    def __init__(self, plan: Plan, steps: list[Step], index_store: IndexStore) -> None:
        self.index_store = index_store
        self.index_steps = {s.index_id: s for s in plan.index_steps}
        self.queued = [step for step in steps if step.method == "build_index"]
        self.waiting: dict[Hashable, list[Step]] = {}  # window step key -> the index steps waiting for it

    def __call__(self, step: Step, outcome: Any) -> list[Step]:
        if step.method == "embed_window":
            # Called before anything else is handed out, so the index steps (which wait for every
            # window) go out with all their windows' seconds: their "embed" stage row counts them.
            for index_step in self.waiting.pop(step.key, []):
                index_id, compact, seconds = index_step.args
                index_step.args = (index_id, compact, seconds + outcome["seconds"])
            return []
        if step.method != "build_chunkset" or outcome["windows"] <= 1:
            return []
        chunkset_id, window_rows = step.args
        pairs: dict[str, list[Step]] = {}  # embedder key -> the index steps waiting for its windows
        for index_step in self.queued:
            built = self.index_steps[index_step.args[0]]
            if built.chunkset_id == chunkset_id and built.embedder is not None \
                    and not self.index_store.is_ready(built.index_id):
                pairs.setdefault(component_key(embedders, built.embedder), []).append(index_step)
        windows: list[Step] = []
        for embedder_key, waiting in pairs.items():
            keys = [("embed", chunkset_id, embedder_key, number) for number in range(outcome["windows"])]
            windows += [Step(key, "embed_window", (waiting[0].args[0], key[3], window_rows), (step.key,))
                        for key in keys]
            for index_step in waiting:
                index_step.needs = (*index_step.needs, *keys)
                # Compact the window steps' commits first; the windows' seconds are added as they finish.
                index_step.args = (index_step.args[0], True, 0.0)
            for key in keys:
                self.waiting[key] = waiting
        return windows


def _cause(error: BaseException) -> str:
    """The original exception behind a Ray task error, in one line."""
    cause = getattr(error, "cause", None) or error
    return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
