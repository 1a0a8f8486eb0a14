"""Execution is dumb: build the chunk sets and indexes the cache lacks, then answer the
questions each run has not committed yet, one shard at a time.

Every question a run is asked leaves a row per metric it is scored on: a question whose pipeline
raises gets NaN with the error for each of those metrics (the names come from scoring an empty
final context, so they are exactly the names a success writes), and a question with no ground
truth gets a ``retrieval`` row saying so.

A backend that is not there at all is not a question's failure: the run commits the questions
answered before it, writes nothing for the rest and stops with ``RunStopped``; running it again
resumes."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.artefacts import ArtefactSync, SharedArtefacts
from ragkit.atomic import write_json_atomic
from ragkit.chunkers.base import chunkers
from ragkit.chunksets import (
    chunk_judged,
    chunkset_path,
    decisions_path,
    load_or_build_chunkset,
    load_or_build_judged_chunkset,
)
from ragkit.corpus.summary import corpus_summary
from ragkit.embedders.base import embedders
from ragkit.embedders.cache import EmbeddingCache, embed_with_cache
from ragkit.errors import BackendUnavailable
from ragkit.experiments.config import GridPoint
from ragkit.experiments.evaluate import QuestionEvaluator
from ragkit.experiments.plan import (
    EVALUATION,
    TRANSFORMS,
    ChunkStep,
    IndexStep,
    Plan,
    RunStep,
    chunker_uses_llm,
    component_key,
    needs_fulltext,
    run_row,
)
from ragkit.experiments.throughput import record_throughput
from ragkit.index import ChunkIndex, IndexStore
from ragkit.integrity import DamagedPart, find_damaged, set_aside
from ragkit.judges.answer_check import ANSWER_CHECK_METRICS, answer_check_scores
from ragkit.judges.base import judges as judge_registry
from ragkit.llms.base import DIGEST_PREFIX, UNKNOWN_DIGEST
from ragkit.llms.base import llms as llm_registry
from ragkit.llms.calls import LLMClient
from ragkit.locks import content_lock
from ragkit.metrics.generation import EvaluationParams, GenerationSample, evaluate_generation
from ragkit.metrics.retrieval import AnswerGroups, FinalContext, has_relevant, has_spans, question_metrics
from ragkit.metrics.routing import abstention_scores, routing_scores
from ragkit.pipeline import Pipeline, Trace, stage_row
from ragkit.qa import Question
from ragkit.registry import ComponentSpec
from ragkit.results import ResultStore
from ragkit.retrievers.base import retrievers
from ragkit.retrievers.cache import RetrievalCache
from ragkit.retrievers.switchable import STRATEGIES, SwitchableRetriever
from ragkit.settings import get_settings
from ragkit.web import web_providers

Progress = Callable[[str, int], None]  # (event, amount): "questions" advanced, "embedded" chunks


# A plan's end writes merged read copies once the folder has this many parts per table: below it,
# opening the parts is fast anyway and a copy would only cost the plan time and disk.
MERGE_MIN_PARTS = 32


@dataclass
class ExecutionReport:
    runs_total: int = 0
    runs_computed: int = 0
    questions_computed: int = 0
    chunks_embedded: int = 0
    chunksets_built: int = 0
    indexes_built: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Committed parts found damaged or missing at the start and set aside (ragkit.integrity):
    # their questions were uncommitted, so this execution answered them again.
    set_aside: list[DamagedPart] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return self.runs_computed == 0


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


class ShardInterrupted(Exception):
    """A backend went away during a shard: the questions answered before it, with their rows."""

    def __init__(self, answered: list[Question], tables: dict[str, pd.DataFrame], cause: BackendUnavailable) -> None:
        super().__init__(str(cause))
        self.answered = answered
        self.tables = tables
        self.cause = cause


class LocalExecutor:
    """Runs a plan in this process; heavy components are built once and reused across runs."""

    def __init__(self, derived_dir: Path, store: ResultStore, data_dir: Path | None = None) -> None:
        self.derived_dir = derived_dir
        self.store = store
        self.data_dir = data_dir or get_settings().resolved_data_dir()
        self._embedders: dict[str, Any] = {}
        self._indexes: dict[str, ChunkIndex] = {}
        self._chunksets: dict[str, pd.DataFrame] = {}
        self._built: set[str] = set()  # chunk set and index ids built by this execution (not cached)
        self._decisions: dict[str, list[dict]] = {}  # chunk set id -> Chunking Judge decisions
        self._llm_clients: dict[str, LLMClient] = {}
        self._index_store = IndexStore(derived_dir / "lancedb")
        self._retrieval_cache = RetrievalCache(self.data_dir / "retrieval_cache")
        shared = get_settings().shared_artefacts
        self._shared = ArtefactSync(SharedArtefacts(shared), derived_dir, self.data_dir, self._step_record) \
            if shared else None

    def _llm_client(self, spec: ComponentSpec) -> LLMClient:
        """One client (and one loaded model) per backend spec, shared by every run and role."""
        key = component_key(llm_registry, spec)
        if key not in self._llm_clients:
            self._llm_clients[key] = LLMClient.for_data_dir(llm_registry.build(spec), self.data_dir)
        return self._llm_clients[key]

    def _llm_digests(self, run: RunStep) -> dict[str, str]:
        """``llm_digest.<role>`` per role: the digest of the model answering it, "unknown" where the
        backend cannot tell (OpenAI-compatible) or its server is down (the run then stops on it).
        Beside the run id, not in it: the run id names the configuration, the digest what a tag
        pointed at when the run was (last) executed, which the regression gate compares."""
        digests = {}
        for role, spec in sorted(run.llms.items()):
            try:
                digest = self._llm_client(spec).backend.model_digest()
            except BackendUnavailable:
                digest = None
            digests[f"{DIGEST_PREFIX}{role}"] = digest or UNKNOWN_DIGEST
        return digests

    def _step_record(self, key: str) -> Path:
        return self.derived_dir / "steps" / f"{key}.json"

    def _embedder(self, spec: ComponentSpec) -> Any:
        key = component_key(embedders, spec)
        if key not in self._embedders:
            self._embedders[key] = embedders.build(spec)
        return self._embedders[key]

    def _chunkset(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> pd.DataFrame:
        if chunkset_id not in self._chunksets:
            step = next(s for s in plan.chunk_steps if s.chunkset_id == chunkset_id)

            llm = self._llm_client(step.judge_llm) if step.judge is None and step.judge_llm else None
            if llm is not None:
                llm.drain_usage()  # only this chunker's calls count for its stage

            def make_chunker() -> Any:
                deps: dict[str, Any] = {}
                if step.chunker.type == "semantic":
                    # Breakpoints come from the bundled MiniLM, so a chunk set does not depend on
                    # which embedder later indexes it.
                    deps["embed_model"] = self._embedder(embedders.resolve("minilm")).embed_model()
                if getattr(chunkers.get(step.chunker.type), "uses_llm", False):
                    deps["llm"] = llm
                chunker = chunkers.build(step.chunker, **deps)
                if chunker_uses_llm(step.chunker):
                    chunker.use_llm(llm)  # chunk summaries
                return chunker

            started = time.perf_counter()
            path = chunkset_path(self.derived_dir, chunkset_id)
            lock = content_lock(self.data_dir, "chunkset", chunkset_id)

            def record_build() -> None:
                # Written before the chunk set itself, so a chunk set on disk always has its cost recorded.
                seconds = time.perf_counter() - started
                record: dict[str, Any]
                if step.judge is None and llm is not None:  # an LLM chunker: its calls are the chunk stage's
                    record = {"chunk": stage_row("chunk", seconds, llm.drain_usage())}
                elif step.judge is None:
                    record = {"chunk": seconds}
                else:
                    usage = self._llm_client(step.judge_llm).drain_usage() if step.judge_llm else []
                    record = {"judge:chunking": stage_row("judge:chunking", seconds, usage)}
                write_json_atomic(self._step_record(chunkset_id), record)

            if self._shared is not None:
                self._shared.fetch_chunkset(chunkset_id)
            if step.judge is None:
                frame, built = load_or_build_chunkset(path, plan.corpus, make_chunker, lock, record_build)
            else:
                frame, decisions, built = self._judged_chunkset(plan, step, path, lock, record_build)
                self._decisions[chunkset_id] = decisions
            if built:
                self._built.add(chunkset_id)
                report.chunksets_built += 1
            if self._shared is not None:
                self._shared.publish_chunkset(chunkset_id)
            self._chunksets[chunkset_id] = frame
        return self._chunksets[chunkset_id]

    def _judged_chunkset(self, plan: Plan, step: ChunkStep, path: Path, lock: AbstractContextManager,
                         record_build: Callable[[], None]) -> tuple[pd.DataFrame, list[dict], bool]:
        judge_spec = step.judge
        assert judge_spec is not None  # only a step with the Chunking Judge on comes here
        llm = self._llm_client(step.judge_llm) if step.judge_llm else None
        if llm is not None:
            llm.drain_usage()  # only the judge's own calls count for its stage
        # The grid's chunker is the judge's fallback: a decision that cannot be used cuts the
        # document as the judge-off run would.
        judge = judge_registry.build({"type": judge_spec.type,
                                      "params": {**judge_spec.params, "default": step.chunker.model_dump()}}, llm=llm)

        def build_chunker(spec):
            deps = {}
            if spec.type == "semantic":
                deps["embed_model"] = self._embedder(embedders.resolve("minilm")).embed_model()
            return chunkers.build(spec, **deps)

        return load_or_build_judged_chunkset(path, decisions_path(self.derived_dir, step.chunkset_id), plan.corpus,
                                             lambda: chunk_judged(plan.corpus, judge.decide, build_chunker),
                                             lock, record_build)

    def _chunk_decisions(self, plan: Plan, run: RunStep, report: ExecutionReport) -> list[dict]:
        """The Chunking Judge's decisions behind this run's chunk set (none when it is off)."""
        step = next(s for s in plan.chunk_steps if s.chunkset_id == run.chunkset_id)
        if step.judge is None:
            return []
        if run.chunkset_id not in self._decisions:
            saved = decisions_path(self.derived_dir, run.chunkset_id)
            if saved.exists():  # built by another process (a Ray worker): read, not rebuilt
                self._decisions[run.chunkset_id] = json.loads(saved.read_text(encoding="utf-8"))
            else:
                self._chunkset(plan, run.chunkset_id, report)
        return self._decisions[run.chunkset_id]

    def run_level_tables(self, plan: Plan, run: RunStep, report: ExecutionReport) -> dict[str, pd.DataFrame]:
        """Rows about the run rather than a question (build costs, per-document chunking
        decisions): they go with the run's first committed shard."""
        decisions = [_judgement_row(run.run_id, None, row) for row in self._chunk_decisions(plan, run, report)]
        return {"stages": pd.DataFrame(self._build_stage_rows(plan, run)), "judgements": pd.DataFrame(decisions)}

    def _evaluator(self, plan: Plan, run: RunStep) -> QuestionEvaluator | None:
        params = run.point.evaluation
        if params is None:
            return None
        llm = self._llm_client(run.llms[EVALUATION]) if EVALUATION in run.llms else None
        # The bundled MiniLM embeds for answer relevancy and embedding groundedness, whatever
        # embedder the run retrieves with, so the metric means the same across runs.
        embed_model = self._embedder(embedders.resolve("minilm")).embed_model()
        return QuestionEvaluator(params, llm, embed_model, plan.corpus.by_id())

    def _pipeline(self, plan: Plan, run: RunStep, index: ChunkIndex) -> Pipeline:
        point = run.point
        embedder = self._embedder(point.embedder) if point.embedder else None
        if embedder is not None:
            # Batched on first need, in the plan's order: see Embedder.expect_queries.
            embedder.expect_queries([q.text for q in plan.questions.questions])
        base = retrievers.build(point.retriever, index=index, embedder=embedder)
        clients = {role: self._llm_client(spec) for role, spec in run.llms.items()}

        def judge(spec, **deps):
            return judge_registry.build(spec, llm=clients.get(spec.type), **deps) if spec is not None else None

        switchable = self._switchable(point, base, index, embedder) if point.switches_strategy() else None
        searchers = [base, *(r for r in (switchable.retrievers.values() if switchable else ()) if r is not base)]
        for searcher in searchers:
            searcher.use_cache(self._retrieval_cache)
        retriever, transforms = switchable or base, []
        for name in TRANSFORMS:
            if point.judge(name) is not None:
                retriever = judge(point.judge(name), retriever=retriever)
                transforms.append(name)
        router = None
        if (router_spec := point.judge("router")) is not None:
            method = router_spec.params.get("summary", "heuristic")
            # Written once per corpus and model, then read from its file: a one-off cost like an
            # index build, kept out of the first question's router stage by a client of its own.
            llm = clients.get("router")
            summary = corpus_summary(plan.corpus, self.data_dir / "summaries", method,
                                     llm.with_own_usage() if llm is not None and method == "llm" else None)
            router = judge(router_spec, summary=summary)
        return Pipeline(
            retriever=retriever,
            base_retriever=switchable or base,
            retrieve_stage="judge:" + "+".join(transforms) if transforms else "retrieve",
            quality_gate=judge(point.judge("quality_gate")),
            retrieval_judge=judge(point.judge("retrieval")),
            rerank=judge(point.judge("rerank")),
            generator=judge(point.generator),
            groundedness=judge(point.judge("groundedness")),
            condense=judge(point.judge("condense")),
            strategy=judge(point.judge("strategy")),
            switchable=switchable,
            router=router,
            web=web_providers.build(point.web) if point.web is not None else None,
            web_results=point.top_k,
            answer_check=judge(point.judge("answer_check")),
            enrichment=judge(point.judge("enrichment"), index=index, embedder=embedder),
            searchers=tuple(searchers),
            retrieval_cache=self._retrieval_cache,
            clients=tuple({id(c): c for c in clients.values()}.values()),
        )

    def serving_pipeline(self, plan: Plan, run: RunStep) -> Pipeline:
        """The run's pipeline, its chunk set and index built or read from the cache, to answer
        questions outside an experiment (``ragkit export-pipeline``'s module); no results written."""
        step = next(s for s in plan.index_steps if s.index_id == run.index_id)
        return self._pipeline(plan, run, self._index(plan, step, ExecutionReport(), lambda event, n: None))

    def _switchable(self, point: GridPoint, base: Any, index: ChunkIndex, embedder: Any) -> SwitchableRetriever:
        """The grid's retriever plus dense, bm25 and hybrid at the same top_k over the same index,
        for the strategy judge and the quality gate's switch map to choose from."""
        # The same scope as the grid's retriever: a switch changes the strategy, not the documents.
        scope = point.retriever.params.get("scope", "all")
        others = {name: retrievers.build({"type": name, "params": {"top_k": point.top_k, "scope": scope}},
                                                      index=index, embedder=embedder)
                      for name in STRATEGIES if name != point.retriever.type}
        return SwitchableRetriever({point.retriever.type: base, **others}, default=point.retriever.type)

    def _index(self, plan: Plan, step: IndexStep, report: ExecutionReport, progress: Progress) -> ChunkIndex:
        if step.index_id not in self._indexes:
            if not self._index_store.is_ready(step.index_id):
                with content_lock(self.data_dir, "index", step.index_id):
                    if not self._index_store.is_ready(step.index_id):  # else built while this process waited
                        if self._shared is None or not self._shared.fetch_index(step.index_id, step.chunkset_id):
                            self._build_index(plan, step, report, progress)
            if self._shared is not None:
                self._shared.publish_index(step.index_id, step.chunkset_id, step.fulltext_key)
            if step.fulltext and not self._index_store.has_fulltext(step.index_id):
                with content_lock(self.data_dir, "index", step.index_id):
                    self._build_fulltext(step)
            self._indexes[step.index_id] = self._index_store.open(step.index_id)
        return self._indexes[step.index_id]

    def _build_fulltext(self, step: IndexStep) -> None:
        """The full-text index, a step of its own: its cost is charged to the runs that search text
        (``needs_fulltext``), not to a dense run of the same index."""
        seconds = self._index_store.ensure_fulltext(step.index_id)
        if seconds is not None:  # else built by another process while this one waited
            write_json_atomic(self._step_record(step.fulltext_key), {"fulltext": seconds})
            self._built.add(step.fulltext_key)

    def _build_index(self, plan: Plan, step: IndexStep, report: ExecutionReport, progress: Progress) -> None:
        chunks = self._chunkset(plan, step.chunkset_id, report)
        timings: dict[str, float] = {}
        vectors = None
        if step.embedder is not None:
            embedder = self._embedder(step.embedder)
            embedder_key = component_key(embedders, step.embedder)
            cache = EmbeddingCache(self.data_dir / "embeddings", embedder_key)
            with content_lock(self.data_dir, "embedder", embedder_key):
                started = time.perf_counter()
                vectors, embedded = embed_with_cache(
                    embedder, chunks["embed_text"].tolist(), chunks["text_sha"].tolist(), cache,
                    get_settings().embed_batch_size, lambda n: progress("embedded", n),
                )
                timings["embed"] = time.perf_counter() - started
            report.chunks_embedded += embedded
            record_throughput(self.data_dir, "embedders", embedder_key, step.embedder.type, embedded, timings["embed"])
        started = time.perf_counter()

        def record_build() -> None:
            # Written before the index is published, so a published index always has its cost recorded.
            timings["index"] = time.perf_counter() - started
            write_json_atomic(self._step_record(step.index_id), timings)

        self._index_store.build(step.index_id, chunks, vectors, record_build, ann=step.ann, fulltext=False)
        report.indexes_built += 1
        self._built.add(step.index_id)

    def _build_stage_rows(self, plan: Plan, run: RunStep) -> list[dict]:
        rows = []
        step = next(s for s in plan.index_steps if s.index_id == run.index_id)
        text_search = [step.fulltext_key] if needs_fulltext(run.point) else []
        for key in (run.chunkset_id, run.index_id, *text_search):
            record = self._step_record(key)
            timings = json.loads(record.read_text()) if record.exists() else {}
            for stage, value in timings.items():
                row = value if isinstance(value, dict) else {"stage": stage, "seconds": value}
                rows.append({**row, "run_id": run.run_id, "question_id": None, "cached": key not in self._built})
        return rows

    def execute(self, plan: Plan, progress: Progress = lambda event, n: None) -> ExecutionReport:
        """Run what the results folder lacks. The folder is locked for the whole run: a second
        writer fails at once (LockTimeout naming this process) instead of interleaving shards.
        Every committed part is checked first; a damaged or missing one is set aside, so its
        questions are answered again (``ExecutionReport.set_aside`` names them)."""
        with self.store.writer_lock():
            # Before the work is planned: a damaged part's questions are then not committed.
            damaged = set_aside(self.store, find_damaged(self.store))
            try:
                report = self._execute(plan, progress)
            finally:  # a run stopped midway measured its calls all the same
                self._record_llm_throughput()
            report.set_aside = damaged
            self._merge(report)
            return report

    def _record_llm_throughput(self) -> None:
        for key, client in self._llm_clients.items():
            calls, seconds = client.take_backend_time()
            label = f"{client.backend.name}:{client.backend.model_name}"
            record_throughput(self.data_dir, "llms", key, label, calls, seconds)

    def _merge(self, report: ExecutionReport) -> None:
        """Write the folder's merged read copies (ragkit.merged): one file per table for readers of
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
            self.store.write_run(run.run_id, {**run_row(plan, run), **self._llm_digests(run)})
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
        return work

    def commit(self, plan: Plan, pending: PendingRun, answered: list[Question], tables: dict[str, pd.DataFrame],
               report: ExecutionReport, progress: Progress) -> None:
        """Commit one shard's rows; the run's first shard also carries its run-level rows."""
        if not answered:
            return
        if pending.needs_run_rows:
            run_rows = self.run_level_tables(plan, pending.run, report)
            tables = {**tables, **{name: _concat(frame, tables.get(name, pd.DataFrame()))
                                   for name, frame in run_rows.items()}}
            pending.needs_run_rows = False
        self.store.commit_shard(pending.run.run_id, [q.id for q in answered], tables,
                                [q.content_key() for q in answered])
        pending.committed += len(answered)
        report.questions_computed += len(answered)
        progress("questions", len(answered))
        if pending.committed == len(plan.questions.questions):
            # Finished: one part per table for the run, so readers open one file per run, not per shard.
            self.store.compact_run(pending.run.run_id)

    def _execute(self, plan: Plan, progress: Progress) -> ExecutionReport:
        started = time.perf_counter()
        report = ExecutionReport(runs_total=len(plan.runs))
        work = self.start(plan)
        index_steps = {s.index_id: s for s in plan.index_steps}
        for pending in work:
            progress("questions", pending.committed)
            if not pending.questions:
                continue
            run = pending.run
            report.runs_computed += 1
            index = self._index(plan, index_steps[run.index_id], report, progress)
            pipeline = self._pipeline(plan, run, index)
            evaluator = self._evaluator(plan, run)
            for shard in _shards(pending.questions, plan.shard_size):
                answered: list[Question] = shard
                outage: BackendUnavailable | None = None
                try:
                    tables = _answer_shard(run, pipeline, shard, evaluator, self._stop_if_unreachable)
                except ShardInterrupted as interrupted:
                    answered, tables, outage = interrupted.answered, interrupted.tables, interrupted.cause
                self.commit(plan, pending, answered, tables, report, progress)
                if outage is not None:
                    raise self._stopped(plan, sum(p.committed for p in work), outage) from outage
        report.seconds = time.perf_counter() - started
        return report

    def _stop_if_unreachable(self) -> None:
        """Raise the outage any client met during the question just answered: ragas catches every
        exception, so an unreachable backend it met would otherwise be a row of NaNs."""
        outages = [outage for client in self._llm_clients.values() if (outage := client.take_outage())]
        if outages:
            raise outages[0]

    def _stopped(self, plan: Plan, committed: int, outage: BackendUnavailable) -> RunStopped:
        total = len(plan.runs) * len(plan.questions.questions)
        return RunStopped(
            f"stopped: the {outage.backend} backend at {outage.url} is unreachable; {committed} of {total} "
            f"questions ({len(plan.runs)} run(s) x {len(plan.questions.questions)}) are committed in "
            f"{self.store.root}; start it and run the same experiment again to resume",
            backend=outage.backend, url=outage.url,
        )


def _shards(items: list[Question], size: int) -> list[list[Question]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _concat(*frames: pd.DataFrame) -> pd.DataFrame:
    non_empty = [frame for frame in frames if not frame.empty]
    return pd.concat(non_empty, ignore_index=True) if non_empty else pd.DataFrame()


def _judgement_row(run_id: str, question_id: str | None, row: dict) -> dict:
    decision = dict(row["decision"])
    if row.get("doc_id"):
        decision.setdefault("doc_id", row["doc_id"])
    return {**{k: v for k, v in row.items() if k != "doc_id"}, "run_id": run_id, "question_id": question_id,
            "decision": json.dumps(decision, default=str, ensure_ascii=False)}


def _error_score(run: RunStep, question: Question, metric: str, error: str) -> dict:
    return {"run_id": run.run_id, "question_id": question.id, "metric": metric, "value": math.nan, "error": error}


def question_row(question: Question) -> dict:
    """The ``questions`` table row; a question without a source document is its own cluster."""
    return {"question_id": question.id, "text": question.text, "document": question.source_document or question.id,
            "n_relevant_docs": len(question.relevant_docs), "n_answer_groups": len(question.span_groups()),
            "question_key": question.content_key()}


def _answer_shard(run: RunStep, pipeline: Pipeline, questions: list[Question],
                  evaluator: QuestionEvaluator | None = None,
                  stop_if_unreachable: Callable[[], None] = lambda: None) -> dict[str, pd.DataFrame]:
    """The shard's rows. ``stop_if_unreachable`` runs after each question and raises
    BackendUnavailable if a backend went away during it; that question then has no rows, and
    ShardInterrupted carries the rows of the questions before it."""
    tables: dict[str, list[dict]] = {"scores": [], "retrievals": [], "stages": [], "judgements": [], "answers": []}
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
        trace = pipeline.answer(question.text, history=question.history, scope=question_documents(question))
    except BackendUnavailable:
        raise  # says nothing about this configuration: the run stops instead
    except Exception as error:  # noqa: BLE001 - one failing question is a row per metric with its error, not a lost run
        params = evaluator.params if evaluator is not None else None
        return {"scores": failure_scores(run, question, f"{type(error).__name__}: {error}", params)}
    tables = _question_rows(run, question, trace)
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


def evaluation_names(params: EvaluationParams) -> list[str]:
    """The score rows an evaluation writes per question (with the repeat suffixes), read off the
    evaluation itself: a sample with nothing in it fails every metric's input check, so nothing
    is computed and no model is called."""
    nothing = GenerationSample(question_id="-", question="", answer="")
    return evaluate_generation([nothing], params, llm=None, embed_model=None)["metric"].tolist()


def failure_scores(run: RunStep, question: Question, error: str, evaluation: EvaluationParams | None) -> list[dict]:
    """NaN with ``error`` for every metric the question would have been scored on (``evaluation``:
    the run's evaluation, if it has one)."""
    names = [row["metric"] for row in _scores(run, question, FinalContext.empty(), Trace(question=question.text))]
    if evaluation is not None:
        names += evaluation_names(evaluation)
    return [_error_score(run, question, name, error) for name in names]


def _answer_groups(question: Question) -> AnswerGroups:
    return [[(span.doc_id, span.start, span.end) for span in group] for group in question.span_groups()]


def _scores(run: RunStep, question: Question, context: FinalContext, trace: Trace) -> list[dict]:
    """The score rows of the final context and the groundedness judge (not the evaluation)."""
    keys = {"run_id": run.run_id, "question_id": question.id}
    groups = _answer_groups(question)
    values = question_metrics(context, question.relevant_docs, groups, run.point.top_k, run.ks)
    scores = [{**keys, "metric": name, "value": value, "error": None} for name, value in values.items()]
    if not (has_relevant(question.relevant_docs) or has_spans(groups)):
        # a question nothing can be scored against is a visible row, not a silent gap
        nothing_to_score = "no relevant documents or answer spans to score against"
        scores.append(_error_score(run, question, "retrieval", nothing_to_score))
    scores += _agentic_scores(run, question, trace)
    if run.point.judge("groundedness") is not None:
        if trace.groundedness is None:
            scores.append(_error_score(run, question, "groundedness", trace.groundedness_error or "not scored"))
        else:
            scores.append({**keys, "metric": "groundedness", "value": trace.groundedness, "error": None})
    return scores


def _agentic_scores(run: RunStep, question: Question, trace: Trace) -> list[dict]:
    """Routing, abstention and answer-check rows, on the runs and questions they apply to.

    Routing is scored on every run of a question that labels its expected route: a run without
    the router sends every question to the documents, which is its baseline. Abstention is scored
    on every run with a generator, whatever else the question set holds: a question's rows depend
    on that question alone, so a set grown question by question (only new questions answered) has
    the rows a set run whole has, and no mean covers fewer questions than the run answered."""
    keys = {"run_id": run.run_id, "question_id": question.id}
    rows = []
    if question.expected_route is not None:
        chosen = trace.route or "documents"
        rows += [{**keys, "metric": name, "value": value, "error": None}
                 for name, value in routing_scores(question.expected_route, chosen).items()]
    if run.point.generator is not None:
        abstained = trace.abstained
        rows += [{**keys, "metric": name, "value": value, "error": None}
                 for name, value in abstention_scores(question.answerable, abstained).items()]
    if run.point.judge("answer_check") is not None:
        if trace.answer_check is None:
            error = trace.answer_check_error or "not checked"
            rows += [_error_score(run, question, name, error) for name in ANSWER_CHECK_METRICS]
        else:
            for name, value in answer_check_scores(trace.answer_check).items():
                rows.append({**keys, "metric": name, "value": value, "error": None} if value is not None
                            else _error_score(run, question, name, trace.answer_check_error or "unusable reply"))
    return rows


def _question_rows(run: RunStep, question: Question, trace: Trace) -> dict[str, list[dict]]:
    keys = {"run_id": run.run_id, "question_id": question.id}
    nodes = trace.nodes
    ranked = [(n.node.metadata["doc_id"], n.node.metadata["start_char"], n.node.metadata["end_char"]) for n in nodes]
    context = FinalContext.from_texts(ranked, [node.node.get_content() for node in nodes])
    retrievals = [{**keys, "rank": rank, "chunk_id": node.node.node_id, "doc_id": item[0], "start_char": item[1],
                   "end_char": item[2], "score": float(node.score or 0.0), "tokens": tokens}
                  for rank, (item, node, tokens) in enumerate(zip(ranked, nodes, context.tokens), start=1)]
    answers = []
    if trace.answer is not None:
        answer = trace.answer
        contexts = {node.node.node_id: node.node.get_content() for node in nodes}
        answers.append({**keys, "answer": answer.text, "citations": json.dumps(answer.citations),
                        "contexts": json.dumps([contexts[i] for i in contexts], ensure_ascii=False),
                        "prompt": answer.prompt, "valid": answer.valid, "error": answer.error})
    return {
        "scores": _scores(run, question, context, trace),
        "retrievals": retrievals,
        "stages": [{**keys, **row} for row in trace.stages],
        "judgements": [_judgement_row(run.run_id, question.id, j.as_row()) for j in trace.judgements],
        "answers": answers,
    }
