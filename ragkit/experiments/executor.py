"""Execution is dumb: build the chunk sets and indexes the cache lacks, then answer the
questions each run has not committed yet, one shard at a time."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ragkit import registry
from ragkit.atomic import write_json_atomic
from ragkit.chunksets import chunkset_path, load_or_build_chunkset
from ragkit.embeddings import EmbeddingCache, embed_with_cache
from ragkit.experiments.plan import IndexStep, Plan, RunStep, component_key, run_row
from ragkit.index import ChunkIndex, IndexStore
from ragkit.metrics.retrieval import run_metrics
from ragkit.qa import Question
from ragkit.results import ResultStore
from ragkit.settings import get_settings

Progress = Callable[[str, int], None]  # (event, amount): "questions" advanced, "embedded" chunks


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

    @property
    def nothing_to_do(self) -> bool:
        return self.runs_computed == 0


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
        self._index_store = IndexStore(derived_dir / "lancedb")

    def _step_record(self, key: str) -> Path:
        return self.derived_dir / "steps" / f"{key}.json"

    def _embedder(self, spec) -> Any:
        key = component_key(registry.embedders, spec)
        if key not in self._embedders:
            self._embedders[key] = registry.embedders.build(spec)
        return self._embedders[key]

    def _chunkset(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> pd.DataFrame:
        if chunkset_id not in self._chunksets:
            step = next(s for s in plan.chunk_steps if s.chunkset_id == chunkset_id)

            def make_chunker() -> Any:
                deps = {}
                if step.chunker.type == "semantic":
                    # Breakpoints come from the bundled MiniLM, so a chunk set does not depend on
                    # which embedder later indexes it.
                    deps["embed_model"] = self._embedder(registry.embedders.resolve("minilm")).embed_model()
                return registry.chunkers.build(step.chunker, **deps)

            started = time.perf_counter()
            path = chunkset_path(self.derived_dir, chunkset_id)
            frame, built = load_or_build_chunkset(path, plan.corpus, make_chunker)
            if built:
                self._built.add(chunkset_id)
                report.chunksets_built += 1
                write_json_atomic(self._step_record(chunkset_id), {"chunk": time.perf_counter() - started})
            self._chunksets[chunkset_id] = frame
        return self._chunksets[chunkset_id]

    def _index(self, plan: Plan, step: IndexStep, report: ExecutionReport, progress: Progress) -> ChunkIndex:
        if step.index_id in self._indexes:
            return self._indexes[step.index_id]
        if self._index_store.is_ready(step.index_id):
            index = self._index_store.open(step.index_id)
        else:
            chunks = self._chunkset(plan, step.chunkset_id, report)
            timings: dict[str, float] = {}
            vectors = None
            if step.embedder is not None:
                embedder = self._embedder(step.embedder)
                cache = EmbeddingCache(self.data_dir / "embeddings", component_key(registry.embedders, step.embedder))
                started = time.perf_counter()
                vectors, embedded = embed_with_cache(
                    embedder, chunks["embed_text"].tolist(), chunks["text_sha"].tolist(), cache,
                    get_settings().embed_batch_size, lambda n: progress("embedded", n),
                )
                timings["embed"] = time.perf_counter() - started
                report.chunks_embedded += embedded
            started = time.perf_counter()
            index = self._index_store.build(step.index_id, chunks, vectors)
            timings["index"] = time.perf_counter() - started
            report.indexes_built += 1
            self._built.add(step.index_id)
            write_json_atomic(self._step_record(step.index_id), timings)
        self._indexes[step.index_id] = index
        return index

    def _build_stage_rows(self, run: RunStep) -> list[dict]:
        rows = []
        for key in (run.chunkset_id, run.index_id):
            record = self._step_record(key)
            timings = json.loads(record.read_text()) if record.exists() else {}
            for stage, seconds in timings.items():
                rows.append({"run_id": run.run_id, "question_id": None, "stage": stage, "seconds": seconds,
                             "cached": key not in self._built})
        return rows

    def execute(self, plan: Plan, progress: Progress = lambda event, n: None) -> ExecutionReport:
        started = time.perf_counter()
        report = ExecutionReport(runs_total=len(plan.runs))
        for run in plan.runs:
            self.store.write_run(run.run_id, run_row(plan, run))
        done = self.store.completed_questions()
        index_steps = {s.index_id: s for s in plan.index_steps}
        for run in plan.runs:
            finished = done.get(run.run_id, set())
            pending = [q for q in plan.questions.questions if q.id not in finished]
            progress("questions", len(plan.questions.questions) - len(pending))
            if not pending:
                continue
            report.runs_computed += 1
            index = self._index(plan, index_steps[run.index_id], report, progress)
            embedder = self._embedder(run.point.embedder) if run.point.embedder else None
            retriever = registry.retrievers.build(run.point.retriever, index=index, embedder=embedder)
            first_shard = not finished
            for shard in _shards(pending, plan.shard_size):
                tables = _answer_shard(run, retriever, shard)
                if first_shard:
                    tables["stages"] = pd.concat([pd.DataFrame(self._build_stage_rows(run)), tables["stages"]])
                    first_shard = False
                self.store.commit_shard(run.run_id, [q.id for q in shard], tables)
                report.questions_computed += len(shard)
                progress("questions", len(shard))
        report.seconds = time.perf_counter() - started
        return report


def _shards(items: list[Question], size: int) -> list[list[Question]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _answer_shard(run: RunStep, retriever: Any, questions: list[Question]) -> dict[str, pd.DataFrame]:
    scores, retrievals, stages = [], [], []
    for question in questions:
        started = time.perf_counter()
        try:
            nodes = retriever.retrieve(question.text)
        except Exception as error:  # one failing question is a row with its error, not a lost run
            scores.append({"run_id": run.run_id, "question_id": question.id, "metric": "retrieval",
                           "value": math.nan, "error": f"{type(error).__name__}: {error}"})
            continue
        stages.append({"run_id": run.run_id, "question_id": question.id, "stage": "retrieve",
                       "seconds": time.perf_counter() - started, "cached": False})
        ranked = [(n.node.metadata["doc_id"], n.node.metadata["start_char"], n.node.metadata["end_char"]) for n in nodes]
        for rank, (item, node) in enumerate(zip(ranked, nodes), start=1):
            retrievals.append({"run_id": run.run_id, "question_id": question.id, "rank": rank,
                               "chunk_id": node.node.node_id, "doc_id": item[0], "start_char": item[1],
                               "end_char": item[2], "score": float(node.score or 0.0)})
        spans = [(s.doc_id, s.start, s.end) for s in question.spans]
        values = run_metrics(ranked, question.relevant_docs, spans, run.point.top_k)
        if not values:  # a question nothing can be scored against is a visible row, not a silent gap
            scores.append({"run_id": run.run_id, "question_id": question.id, "metric": "retrieval",
                           "value": math.nan, "error": "no relevant documents or answer spans to score against"})
        scores.extend({"run_id": run.run_id, "question_id": question.id, "metric": name, "value": value, "error": None}
                      for name, value in values.items())
    return {"scores": pd.DataFrame(scores), "retrievals": pd.DataFrame(retrievals), "stages": pd.DataFrame(stages)}
