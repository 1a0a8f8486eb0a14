"""ExperimentConfig: what a user writes in YAML, validated strictly; its sections (dataset,
corpus, LLM roles) and the cross-field rules (a judge that checks answers needs a generator)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ragkit.artefacts.index import AnnParams
from ragkit.chunkers.registry import chunkers as chunker_registry
from ragkit.embedders.base import embedders as embedder_registry
from ragkit.errors import ConfigError
from ragkit.experiments.baselines import check_baselines
from ragkit.experiments.config.judge_choice import (
    GENERATOR,
    JudgeChoice,
    check_judge_roles,
    is_judge,
    judge_names,
    judge_specs,
    role_name,
)
from ragkit.experiments.config.specs import StrictModel, embedder_spec_list, resolve_at, spec_list
from ragkit.experiments.search import SearchConfig
from ragkit.llms.base import llms as llm_registry
from ragkit.metrics.generation import METRICS as GENERATION_METRICS
from ragkit.metrics.generation import EvaluationParams
from ragkit.quoting import quoted
from ragkit.registry import ComponentSpec
from ragkit.retrievers.registry import retrievers as retriever_registry
from ragkit.stages.base import STAGES as judge_registry
from ragkit.stages.retrieval.quality_gate.params import QualityGateParams
from ragkit.stages.roles import check_single_roles, position, reads_of
from ragkit.web import web_providers


class DatasetConfig(StrictModel):
    path: str = Field(description="Question set: a BEIR folder, a SQuAD-style folder or file, or a JSONL/CSV file.")
    format: str = Field(default="auto", description="auto, beir, squad, jsonl or csv.")
    split: str = Field(default="test", description="qrels split for BEIR folders.")
    limit: int | None = Field(default=None, ge=1, description="Use only the first N questions.")
    documents: Literal["all", "questions"] = Field(
        default="all",
        description="all: the whole corpus; questions: only the documents the questions used are about (their "
        "relevant, answer-span and source documents), for a quick look at a grid whose chunker or judges read "
        "every document with an LLM (with limit: the first N questions' documents). A smaller corpus is a "
        "different corpus: its own chunk sets and indexes, and retrieval without the other documents.")


class CorpusConfig(StrictModel):
    name: str | None = Field(default=None, description="A corpus ingested with `ragkit ingest`.")
    path: str | None = Field(default=None, description="Files or a folder to ingest (content-addressed, so cheap).")

    @model_validator(mode="after")
    def _exactly_one(self) -> CorpusConfig:
        if (self.name is None) == (self.path is None):
            raise ValueError("corpus needs exactly one of 'name' (an ingested corpus) or 'path' (files to ingest)")
        return self


class LLMConfig(StrictModel):
    """Which LLM backend each role uses; without `default`, ollama if a server answers, else local."""

    default: ComponentSpec | None = Field(default=None, description="Backend for every role not listed.")
    roles: dict[str, ComponentSpec] = Field(
        default_factory=dict, description="Role (a judge name, generator or evaluation) -> backend spec."
    )

    @field_validator("default", mode="before")
    @classmethod
    def _short_default(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @field_validator("roles", mode="before")
    @classmethod
    def _short_roles(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {role: {"type": spec} if isinstance(spec, str) else spec for role, spec in value.items()}
        return value

    def resolved(self) -> LLMConfig:
        unknown = sorted(role for role in self.roles if role not in (GENERATOR, "evaluation") and not is_judge(role))
        if unknown:
            valid_roles = [*judge_names(), GENERATOR, "evaluation"]
            raise ConfigError(f"llm.roles: unknown role {quoted(unknown)}. Valid roles: {', '.join(valid_roles)}")
        return LLMConfig(
            default=resolve_at("llm.default", llm_registry.resolve, self.default)
            if self.default is not None else None,
            roles={role: resolve_at(f"llm.roles.{role}", llm_registry.resolve, spec)
                   for role, spec in self.roles.items()},
        )


class ExperimentConfig(StrictModel):
    # Bounded: the name is a folder name (255 bytes on most file systems), the description is
    # printed in every report.
    name: str = Field(max_length=100, description="Experiment name (also the default results folder name).")
    description: str = Field(default="", max_length=10_000, description="Free text shown in reports.")
    dataset: DatasetConfig
    corpus: CorpusConfig | None = Field(
        default=None, description="Where documents come from; default: the dataset's own corpus.jsonl."
    )
    chunkers: list[ComponentSpec] = Field(default_factory=lambda: [ComponentSpec(type="recursive")], min_length=1)
    embedders: list[ComponentSpec] = Field(
        default_factory=lambda: [ComponentSpec(type="minilm")],
        description="May be empty when every retriever ignores vectors (bm25). `auto`: Ollama's nomic-embed-text "
        "(params.ollama_model) when a server answers, else minilm.",
    )
    retrievers: list[ComponentSpec] = Field(default_factory=lambda: [ComponentSpec(type="dense")], min_length=1)
    top_k: list[int] = Field(default_factory=lambda: [10], min_length=1, description="Grid of top-k values.")
    judges: dict[str, JudgeChoice] = Field(
        default_factory=dict, description="Judge name -> modes to run (off / heuristic / llm / both) and params."
    )
    generator: ComponentSpec | None = Field(
        default=None, description="Generate answers (true or {params: ...}); default: retrieval only."
    )
    llm: LLMConfig = Field(default_factory=LLMConfig, description="LLM backend per role; default: auto.")
    evaluation: EvaluationParams | None = Field(
        default=None,
        description="Generation metrics (ragas, embedding groundedness) of the answers; the LLM judge "
        "is the `evaluation` role of `llm`. true: the default metrics.",
    )
    shard_size: int = Field(default=100, ge=1, le=100_000, description="Questions per committed results part.")
    web: ComponentSpec | None = Field(
        default=None,
        description="Web search provider (entry-point group ragkit.web) for the router's web route and the "
        "quality gate's web_fallback; none by default: a web route is then answered 'not found'.",
    )
    baseline: dict[str, str] = Field(
        default_factory=dict,
        description="Per factor, the level its other levels are tested against in the report's factor table, "
        "e.g. {chunker: token, judge.rerank: off}; default: the factor's first level (see ragkit.experiments."
        "baselines). Not part of any run id.",
    )
    ann: AnnParams = Field(
        default_factory=AnnParams,
        description="Approximate-nearest-neighbour index on the vectors of large indexes (none by default: exact "
        "search). Part of the index and run ids when on, because approximate search changes results.",
    )
    search: SearchConfig | None = Field(
        default=None, description="Budgeted search over the grid (grid, random, tpe, halving) instead of running "
        "every point on every question; each trial is an ordinary run of the grid.",
    )

    @field_validator("web", mode="before")
    @classmethod
    def _web_short(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @field_validator("evaluation", mode="before")
    @classmethod
    def _evaluation_short(cls, value: Any) -> Any:
        return {} if value is True else (None if value is False else value)

    @field_validator("generator", mode="before")
    @classmethod
    def _generator_short(cls, value: Any) -> Any:
        if value is True:
            return {"type": GENERATOR}
        if value is False:
            return None
        if isinstance(value, dict) and "type" not in value:
            return {"type": GENERATOR, **value}
        return value

    _shorthand_specs = field_validator("chunkers", "retrievers", mode="before")(spec_list)
    _embedder_shorthand = field_validator("embedders", mode="before")(embedder_spec_list)

    @field_validator("baseline", mode="before")
    @classmethod
    def _levels_as_text(cls, value: Any) -> Any:
        # `top_k: 10` names the level "10"; YAML reads it as a number.
        return {k: str(v) for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("top_k", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value

    @field_validator("top_k")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        bad = [k for k in value if not 1 <= k <= 1000]
        if bad:
            raise ValueError(f"top_k values must be between 1 and 1000, got {quoted(bad)}")
        return sorted(set(value))

    @model_validator(mode="after")
    def _components_exist(self) -> ExperimentConfig:
        # Resolving checks names and params now, with messages that list the valid choices.
        check_baselines(self, self.resolved_components())
        if not self.embedders:
            needing = [s.type for s in self.retrievers if retriever_registry.info(s.type).uses_embedder]
            if needing:
                raise ValueError(f"retrievers {needing} need an embedder: add one to 'embedders' (e.g. minilm)")
            if any(point_switches(self, name) for name in ("strategy", "quality_gate", "groundedness", "answer_check")):
                raise ValueError("switching retrieval strategy (the strategy judge, quality_gate.switch_strategy, "
                                 "groundedness.re_retrieve_strategy or answer_check.retry_strategy) may use dense or "
                                 "hybrid retrieval: add an embedder to 'embedders' (e.g. minilm)")
            cached = [s.type for s in self.retrievers if s.params.get("semantic_cache") is not None]
            if cached:
                raise ValueError(f"retrievers {cached} set semantic_cache, which compares query embeddings: add an "
                                 "embedder to 'embedders' (e.g. minilm)")
        # A bm25 run's index holds no vectors (it gets no embedder), so nothing to compare with.
        textual = [s.type for s in self.retrievers if s.params.get("min_similarity") is not None
                   and not retriever_registry.info(s.type).uses_embedder]
        if textual:
            raise ValueError(f"retrievers {textual} set min_similarity, which compares chunk vectors their "
                             "text-only index does not hold: use score_threshold (their own scores) or a dense or "
                             "hybrid retriever")
        check_gate_scales(self)
        if "groundedness" in self.judges and self.generator is None:
            specs = judge_specs("groundedness", self.judges["groundedness"])
            needs_answer = [s for s in specs if s.params["mode"] != "off"]
            if needs_answer:
                raise ValueError("judge 'groundedness' checks generated answers: set 'generator: true'")
        # The router (a conversational route is answered by the generator) and what reads the answer.
        needs_generator = sorted((name for name in self.judges if is_judge(name) and name != "groundedness"
                                  and (role_name(name) == "route" or "answer" in reads_of(judge_registry.info(name)))
                                  and any(s.params["mode"] != "off" for s in judge_specs(name, self.judges[name]))),
                                 key=lambda name: position(judge_registry.info(name)))
        if needs_generator and self.generator is None:
            raise ValueError(f"judges {needs_generator} need generated answers: set 'generator: true'")
        if self.evaluation is not None and self.generator is None:
            needing = [m for m in self.evaluation.metrics if "answer" in GENERATION_METRICS[m].inputs]
            if needing:
                raise ValueError(f"evaluation metrics {needing} score generated answers: set 'generator: true'")
        return self

    def evaluation_calls_llm(self) -> bool:
        return self.evaluation is not None and any(GENERATION_METRICS[m].needs_llm for m in self.evaluation.metrics)

    def resolved_components(self) -> dict[str, Any]:
        unknown = sorted(name for name in self.judges if not is_judge(name))
        check_judge_roles(unknown)  # a plugin's stage the pipeline would never run
        if unknown:
            raise ConfigError(f"judges: unknown judge {quoted(unknown)}. Valid judges: {', '.join(judge_names())}")
        check_single_roles([judge_registry.info(name) for name in sorted(self.judges)], "judges")
        generator = self.generator
        return {
            "chunkers": [resolve_at(f"chunkers.{i}", chunker_registry.resolve, s)
                         for i, s in enumerate(self.chunkers)],
            "embedders": [resolve_at(f"embedders.{i}", embedder_registry.resolve, s)
                          for i, s in enumerate(self.embedders)],
            "retrievers": [resolve_at(f"retrievers.{i}", retriever_registry.resolve, s)
                           for i, s in enumerate(self.retrievers)],
            "judges": {name: judge_specs(name, choice) for name, choice in sorted(self.judges.items())},
            "generator": resolve_at("generator", judge_registry.resolve, generator) if generator is not None else None,
            "llm": self.llm.resolved(),
            "web": resolve_at("web", web_providers.resolve, self.web) if self.web is not None else None,
        }


def point_switches(config: ExperimentConfig, judge: str) -> bool:
    """Some grid point of ``config`` lets ``judge`` switch the retrieval strategy."""
    if judge not in config.judges:
        return False
    specs = [spec for spec in judge_specs(judge, config.judges[judge]) if spec.params["mode"] != "off"]
    # The same tests as GridPoint.switches_strategy, the late tier's re-retrievals included.
    late = {"groundedness": "re_retrieve_strategy", "answer_check": "retry_strategy"}.get(judge)
    return any(judge == "strategy" or spec.params.get("switch_strategy")
               or (late is not None and spec.params.get(late, "same") != "same")
               or (judge == "answer_check" and spec.params.get("issue_set") == "design") for spec in specs)


def check_gate_scales(config: ExperimentConfig) -> None:
    """Refuse a heuristic quality gate whose thresholds, on the retriever's raw scores, no hit of a
    retriever in the grid can reach (hybrid's RRF scores stay under 2 / rrf_k): every attempt would
    fail, and the gate would retry and fall back on every question whatever was retrieved."""
    if "quality_gate" not in config.judges:
        return
    gates = [QualityGateParams(**spec.params) for spec in judge_specs("quality_gate", config.judges["quality_gate"])]
    raw = [gate for gate in gates if gate.mode == "heuristic" and gate.scale() == "retriever"
           and gate.position == "before_rerank"]  # after a rerank the values are the reranker's
    for gate in raw:
        top, mean, _ = gate.thresholds()
        for spec in config.retrievers:
            ceiling = retriever_registry.info(spec.type).score_ceiling(spec.params)
            if ceiling is not None and max(top, mean) > ceiling:
                most = round(ceiling, 4)
                raise ValueError(
                    f"quality_gate: heuristic thresholds (top {top}, mean {mean}, preset {gate.preset}) on the "
                    f"retriever scale cannot be reached by retriever {spec.type!r}, whose scores are at most {most}: "
                    f"set attempt_scale: question_overlap, or thresholds at most {most}")
