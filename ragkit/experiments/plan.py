"""Planning is pure: a config, a corpus and a question set become content-keyed steps.

Chunk sets, indexes and runs are named by hashes of what they are made from, so steps shared by
several configurations appear once, and an executor can skip every step whose output exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragkit import registry
from ragkit.corpus.model import Corpus
from ragkit.experiments.config import ExperimentConfig, GridPoint, expand_grid
from ragkit.hashing import content_key
from ragkit.qa import QuestionSet
from ragkit.registry import ComponentSpec


@dataclass(frozen=True)
class ChunkStep:
    chunkset_id: str
    chunker: ComponentSpec


@dataclass(frozen=True)
class IndexStep:
    index_id: str
    chunkset_id: str
    embedder: ComponentSpec | None


@dataclass(frozen=True)
class RunStep:
    run_id: str
    point: GridPoint
    chunkset_id: str
    index_id: str


@dataclass(frozen=True)
class Plan:
    experiment: str
    corpus: Corpus
    questions: QuestionSet
    questions_key: str
    chunk_steps: tuple[ChunkStep, ...]
    index_steps: tuple[IndexStep, ...]
    runs: tuple[RunStep, ...]
    shard_size: int = 100


def component_key(kind: registry.Registry, spec: ComponentSpec | None) -> str | None:
    if spec is None:
        return None
    cls = kind.get(spec.type)
    return content_key(kind.kind, spec.type, cls.version, spec.params)


def questions_key(questions: QuestionSet) -> str:
    return content_key("questions", [q.model_dump(mode="json") for q in questions.questions])


def make_plan(config: ExperimentConfig, corpus: Corpus, questions: QuestionSet) -> Plan:
    q_key = questions_key(questions)
    chunk_steps: dict[str, ChunkStep] = {}
    index_steps: dict[str, IndexStep] = {}
    runs: dict[str, RunStep] = {}
    for point in expand_grid(config):
        chunkset_id = content_key("chunkset", corpus.corpus_id, component_key(registry.chunkers, point.chunker))
        index_id = content_key("index", chunkset_id, component_key(registry.embedders, point.embedder))
        run_id = content_key(
            "run", corpus.corpus_id, q_key, component_key(registry.chunkers, point.chunker),
            component_key(registry.embedders, point.embedder), component_key(registry.retrievers, point.retriever),
        )
        chunk_steps.setdefault(chunkset_id, ChunkStep(chunkset_id, point.chunker))
        index_steps.setdefault(index_id, IndexStep(index_id, chunkset_id, point.embedder))
        runs.setdefault(run_id, RunStep(run_id, point, chunkset_id, index_id))
    return Plan(
        experiment=config.name,
        corpus=corpus,
        questions=questions,
        questions_key=q_key,
        chunk_steps=tuple(chunk_steps.values()),
        index_steps=tuple(index_steps.values()),
        runs=tuple(runs.values()),
        shard_size=config.shard_size,
    )


def run_row(plan: Plan, step: RunStep) -> dict:
    """The `runs` table row: run id and every config field as a column."""
    point = step.point
    row: dict = {
        "run_id": step.run_id,
        "experiment": plan.experiment,
        "corpus": plan.corpus.name,
        "corpus_id": plan.corpus.corpus_id,
        "questions_key": plan.questions_key,
        "chunkset_id": step.chunkset_id,
        "index_id": step.index_id,
        "chunker": point.chunker.type,
        "embedder": point.embedder.type if point.embedder else None,
        "retriever": point.retriever.type,
        "top_k": point.top_k,
    }
    for kind, spec in (("chunker", point.chunker), ("embedder", point.embedder), ("retriever", point.retriever)):
        for name, value in (spec.params if spec else {}).items():
            row[f"{kind}.{name}"] = value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
    return row
