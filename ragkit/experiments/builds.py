"""Chunk sets and indexes, each built once: read from the derived folder, fetched from shared
storage when configured, or built under a content lock (so two processes never build one twice).
Each build writes a step record of its cost before its output is published, and the runs that
use it carry that cost as stage rows, marked cached when this execution did not build it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, closing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.artefacts.chunksets import (
    build_chunkset_streamed,
    build_judged_chunkset_streamed,
    chunk_judged,
    chunkset_path,
    decisions_path,
    load_or_build_chunkset,
    load_or_build_judged_chunkset,
)
from ragkit.artefacts.index import ChunkIndex, IndexStore
from ragkit.artefacts.index_stream import EmbeddingTally, chunkset_windows, embedded_windows, index_batch_reader
from ragkit.artefacts.sharing import ArtefactSync, SharedArtefacts
from ragkit.chunkers.registry import chunkers
from ragkit.embedders.base import embedders
from ragkit.embedders.cache import EmbeddingCache, embed_with_cache
from ragkit.experiments.components import SharedComponents
from ragkit.experiments.execution_report import ExecutionReport, Progress
from ragkit.experiments.plan import ChunkStep, IndexStep, Plan, RunStep, chunker_uses_llm, component_key, needs_fulltext
from ragkit.experiments.status import INDEX_BUILT, INDEX_STARTED
from ragkit.experiments.throughput import record_throughput
from ragkit.pipeline.steps import stage_row
from ragkit.settings import get_settings
from ragkit.stages.base import STAGES as judge_registry
from ragkit.storage.atomic import write_json_atomic
from ragkit.storage.locks import content_lock


class ArtefactBuilds:
    """The chunk sets and indexes of plans, kept open for the runs of this process."""

    def __init__(self, derived_dir: Path, data_dir: Path, components: SharedComponents) -> None:
        self.derived_dir = derived_dir
        self.data_dir = data_dir
        self.components = components
        self._chunksets: dict[str, pd.DataFrame] = {}
        self._indexes: dict[str, ChunkIndex] = {}
        self._decisions: dict[str, list[dict]] = {}  # chunk set id -> Chunking Judge decisions
        self._chunkset_files: set[str] = set()  # chunk set ids whose file this process has made sure of
        self._built: set[str] = set()  # chunk set and index ids built by this execution (not cached)
        # Index id -> seconds its vectors took in other steps (a Ray run's window steps): added to
        # the index's "embed" stage, which would otherwise count only this build's cache lookups.
        self.embedded_before: dict[str, float] = {}
        self._index_store = IndexStore(derived_dir / "lancedb")
        shared = get_settings().shared_artefacts
        self._shared = ArtefactSync(SharedArtefacts(shared), derived_dir, data_dir, self.step_record) \
            if shared else None

    @property
    def built_keys(self) -> frozenset[str]:
        """The chunk set, index and full-text keys built (not found cached) by this process."""
        return frozenset(self._built)

    @property
    def loaded_chunksets(self) -> frozenset[str]:
        """The chunk sets held here as frames: an index of one is built from the frame, not streamed."""
        return frozenset(self._chunksets)

    def mark_built(self, keys: Iterable[str]) -> None:
        """Record keys another process built for this execution (a Ray worker's builds)."""
        self._built.update(keys)

    def step_record(self, key: str) -> Path:
        """The file holding a build step's cost (its stage rows' timings and LLM usage)."""
        return self.derived_dir / "steps" / f"{key}.json"

    def chunkset(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> pd.DataFrame:
        """The chunk set's frame, read or built (``report.chunksets_built`` counts a build)."""
        if chunkset_id not in self._chunksets:
            frame = self._ensure_chunkset(plan, chunkset_id, report)
            self._chunksets[chunkset_id] = frame if frame is not None else \
                pd.read_parquet(chunkset_path(self.derived_dir, chunkset_id))
        return self._chunksets[chunkset_id]

    def chunkset_file(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> Path:
        """The chunk set's file, read, fetched or built like ``chunkset`` but not read into memory
        when the build streams (``build_window_rows``): a streamed index build reads it in windows."""
        if chunkset_id not in self._chunksets:
            frame = self._ensure_chunkset(plan, chunkset_id, report)
            if frame is not None:
                self._chunksets[chunkset_id] = frame
        return chunkset_path(self.derived_dir, chunkset_id)

    def _ensure_chunkset(self, plan: Plan, chunkset_id: str, report: ExecutionReport) -> pd.DataFrame | None:
        """Make sure the chunk set's file exists (fetched or built once per process); its frame
        when the build made or read one, None when it streamed (or an earlier call did the work)."""
        if chunkset_id in self._chunkset_files:
            return None
        step = next(s for s in plan.chunk_steps if s.chunkset_id == chunkset_id)

        llm = self.components.llm_client(step.judge_llm) if step.judge is None and step.judge_llm else None
        if llm is not None:
            llm.drain_usage()  # only this chunker's calls count for its stage

        def make_chunker() -> Any:
            deps: dict[str, Any] = {}
            if step.chunker.type == "semantic":
                # Breakpoints come from the bundled MiniLM, so a chunk set does not depend on
                # which embedder later indexes it.
                deps["embed_model"] = self.components.reference_embed_model()
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
                usage = self.components.llm_client(step.judge_llm).drain_usage() if step.judge_llm else []
                record = {"judge:chunking": stage_row("judge:chunking", seconds, usage)}
            write_json_atomic(self.step_record(chunkset_id), record)

        if self._shared is not None:
            self._shared.fetch_chunkset(chunkset_id)
        window_rows = get_settings().build_window_rows
        frame: pd.DataFrame | None = None
        if step.judge is None and window_rows:
            built = build_chunkset_streamed(path, plan.corpus, make_chunker, window_rows, lock, record_build)
        elif step.judge is None:
            frame, built = load_or_build_chunkset(path, plan.corpus, make_chunker, lock, record_build)
        else:
            frame, decisions, built = self._judged_chunkset(plan, step, path, lock, record_build)
            self._decisions[chunkset_id] = decisions
        if built:
            self._built.add(chunkset_id)
            report.chunksets_built += 1
        if self._shared is not None:
            self._shared.publish_chunkset(chunkset_id)
        self._chunkset_files.add(chunkset_id)  # only once it is there: a failed build is tried again
        return frame

    def _judged_chunkset(self, plan: Plan, step: ChunkStep, path: Path, lock: AbstractContextManager,
                         record_build: Callable[[], None]) -> tuple[pd.DataFrame | None, list[dict], bool]:
        judge_spec = step.judge
        assert judge_spec is not None  # only a step with the Chunking Judge on comes here
        llm = self.components.llm_client(step.judge_llm) if step.judge_llm else None
        if llm is not None:
            llm.drain_usage()  # only the judge's own calls count for its stage
        # The grid's chunker is the judge's fallback: a decision that cannot be used cuts the
        # document as the judge-off run would.
        judge = judge_registry.build({"type": judge_spec.type,
                                      "params": {**judge_spec.params, "default": step.chunker.model_dump()}}, llm=llm)

        def build_chunker(spec):
            deps = {}
            if spec.type == "semantic":
                deps["embed_model"] = self.components.reference_embed_model()
            # The fallback (the grid's chunker) may ask the LLM itself (llm_semantic, summaries): it
            # runs on the chunking role's model, the judge's, whose usage the judge's stage records.
            if getattr(chunkers.get(spec.type), "uses_llm", False):
                deps["llm"] = llm
            chunker = chunkers.build(spec, **deps)
            if chunker_uses_llm(spec) and llm is not None:
                chunker.use_llm(llm)
            return chunker

        decisions_file = decisions_path(self.derived_dir, step.chunkset_id)
        window_rows = get_settings().build_window_rows
        if window_rows:  # a batch of documents at a time, written by row group (None: no frame)
            decisions, built = build_judged_chunkset_streamed(path, decisions_file, plan.corpus, judge.decide,
                                                              build_chunker, window_rows, lock, record_build)
            return None, decisions, built
        return load_or_build_judged_chunkset(path, decisions_file, plan.corpus,
                                             lambda: chunk_judged(plan.corpus, judge.decide, build_chunker),
                                             lock, record_build)

    def chunk_decisions(self, plan: Plan, run: RunStep, report: ExecutionReport) -> list[dict]:
        """The Chunking Judge's decisions behind this run's chunk set (none when it is off)."""
        step = next(s for s in plan.chunk_steps if s.chunkset_id == run.chunkset_id)
        if step.judge is None:
            return []
        if run.chunkset_id not in self._decisions:
            saved = decisions_path(self.derived_dir, run.chunkset_id)
            if saved.exists():  # built by another process (a Ray worker): read, not rebuilt
                self._decisions[run.chunkset_id] = json.loads(saved.read_text(encoding="utf-8"))
            else:
                self.chunkset(plan, run.chunkset_id, report)
        return self._decisions[run.chunkset_id]

    def index(self, plan: Plan, step: IndexStep, report: ExecutionReport, progress: Progress) -> ChunkIndex:
        """The step's index, open: read, fetched or built (``report.indexes_built`` counts a build),
        with its full-text index when the step asks for one."""
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
        def record_build(seconds: float) -> None:
            # Written before the marker, so a full-text index marked built always has its cost
            # recorded (a kill between the two once lost the resumed run's "fulltext" stage row).
            write_json_atomic(self.step_record(step.fulltext_key), {"fulltext": seconds})

        if self._index_store.ensure_fulltext(step.index_id, record_build) is not None:
            self._built.add(step.fulltext_key)  # else built by another process while this one waited

    def _build_index(self, plan: Plan, step: IndexStep, report: ExecutionReport, progress: Progress) -> None:
        window_rows = get_settings().build_window_rows
        if window_rows and step.chunkset_id not in self._chunksets:
            import pyarrow.parquet as pq

            path = self.chunkset_file(plan, step.chunkset_id, report)
            if step.chunkset_id not in self._chunksets and pq.ParquetFile(path).metadata.num_rows > 0:
                self._build_index_streamed(step, path, window_rows, report, progress)
                return
        chunks = self.chunkset(plan, step.chunkset_id, report)
        timings: dict[str, float] = {}
        vectors = None
        if step.embedder is not None:
            progress(INDEX_STARTED, len(chunks))
            embedder = self.components.embedder(step.embedder)
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
            timings["embed"] += self.embedded_before.pop(step.index_id, 0.0)
        started = time.perf_counter()

        def record_build() -> None:
            # Written before the index is published, so a published index always has its cost recorded.
            timings["index"] = time.perf_counter() - started
            write_json_atomic(self.step_record(step.index_id), timings)

        self._index_store.build(step.index_id, chunks, vectors, record_build, ann=step.ann, fulltext=False)
        if step.embedder is not None:
            progress(INDEX_BUILT, 1)
        report.indexes_built += 1
        self._built.add(step.index_id)

    def _build_index_streamed(self, step: IndexStep, path: Path, window_rows: int, report: ExecutionReport,
                              progress: Progress) -> None:
        """``_build_index`` a window of the chunk set file at a time (``ragkit.artefacts.index_stream``):
        the same table and stage rows, the embedding interleaved with LanceDB's writes (its
        seconds are the embed stage, the rest of the build the index stage)."""
        windows: Generator[tuple[pd.DataFrame, np.ndarray | None], None, None]
        tally = EmbeddingTally()
        if step.embedder is not None:
            import pyarrow.parquet as pq

            progress(INDEX_STARTED, pq.ParquetFile(path).metadata.num_rows)
            embedder = self.components.embedder(step.embedder)
            embedder_key = component_key(embedders, step.embedder)
            cache = EmbeddingCache(self.data_dir / "embeddings", embedder_key)
            windows = embedded_windows(chunkset_windows(path, window_rows), embedder, cache,
                                       get_settings().embed_batch_size,
                                       content_lock(self.data_dir, "embedder", embedder_key), tally,
                                       lambda n: progress("embedded", n))
        else:
            windows = ((frame, None) for frame in chunkset_windows(path, window_rows))
        started = time.perf_counter()

        def record_build() -> None:
            # Written before the index is published, so a published index always has its cost recorded.
            before = self.embedded_before.pop(step.index_id, 0.0)
            timings = {"embed": tally.seconds + before} if step.embedder is not None else {}
            timings["index"] = time.perf_counter() - started - tally.seconds
            write_json_atomic(self.step_record(step.index_id), timings)

        with closing(windows):  # a failed write releases the embedder's lock now, not when collected
            self._index_store.build_from_batches(step.index_id, index_batch_reader(windows), record_build,
                                                 ann=step.ann, fulltext=False)
        if step.embedder is not None:
            progress(INDEX_BUILT, 1)
            report.chunks_embedded += tally.embedded
            record_throughput(self.data_dir, "embedders", embedder_key, step.embedder.type, tally.embedded,
                              tally.seconds)
        report.indexes_built += 1
        self._built.add(step.index_id)

    def embedding_keys(self, plan: Plan, run: RunStep, report: ExecutionReport) -> tuple[str, list[str]] | None:
        """(embedder key, text keys of the run's chunk set): the vectors its index is built from,
        which ``ragkit cache prune --keep-runs`` keeps; None for an index without vectors."""
        step = next(s for s in plan.index_steps if s.index_id == run.index_id)
        if step.embedder is None:
            return None
        if run.chunkset_id not in self._chunksets and not chunkset_path(self.derived_dir, run.chunkset_id).exists():
            # The index came from elsewhere (shared artefacts) without its chunk set: this machine's
            # embedding cache made none of its vectors, so there is nothing of it to keep, and
            # fetching the chunk set only to list them would undo what sharing saved.
            return None
        if run.chunkset_id in self._chunksets:
            keys = self._chunksets[run.chunkset_id]["text_sha"].tolist()
        else:  # the key column alone: a streamed build never reads the whole chunk set
            import pyarrow.parquet as pq

            path = self.chunkset_file(plan, run.chunkset_id, report)
            keys = pq.read_table(path, columns=["text_sha"]).column("text_sha").to_pylist()
        return component_key(embedders, step.embedder), keys

    def build_stage_rows(self, plan: Plan, run: RunStep) -> list[dict]:
        """The stage rows of the builds behind ``run`` (chunk set, index, full text if it searches
        text), ``cached`` where this execution did not build them."""
        rows = []
        step = next(s for s in plan.index_steps if s.index_id == run.index_id)
        text_search = [step.fulltext_key] if needs_fulltext(run.point) else []
        for key in (run.chunkset_id, run.index_id, *text_search):
            record = self.step_record(key)
            timings = json.loads(record.read_text()) if record.exists() else {}
            for stage, value in timings.items():
                row = value if isinstance(value, dict) else {"stage": stage, "seconds": value}
                rows.append({**row, "run_id": run.run_id, "question_id": None, "cached": key not in self._built})
        return rows
