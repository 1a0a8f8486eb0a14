"""ExperimentConfig: what a user writes in YAML, validated strictly, and its grid of runs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragkit.chunkers.base import chunkers
from ragkit.embedders.base import embedders
from ragkit.errors import ConfigError, validation_problems
from ragkit.experiments.baselines import check_baselines
from ragkit.experiments.search import SearchConfig
from ragkit.index import AnnParams
from ragkit.judges.base import PIPELINE_SLOTS, check_judge_places
from ragkit.judges.base import judges as judge_registry
from ragkit.llms.base import llms as llm_registry
from ragkit.metrics.generation import METRICS as GENERATION_METRICS
from ragkit.metrics.generation import EvaluationParams
from ragkit.quoting import clipped, quoted
from ragkit.registry import ComponentSpec
from ragkit.retrievers.base import retrievers
from ragkit.web import web_providers
from ragkit.yaml_input import load_yaml

if TYPE_CHECKING:
    from ragkit.judges.base import Judge

# Fields holding filesystem paths: relative values are resolved against the YAML file's folder
# (values given with --set are resolved against the current directory instead).
PATH_FIELDS = (("dataset", "path"), ("corpus", "path"))


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetConfig(StrictModel):
    path: str = Field(description="Question set: a BEIR folder, a SQuAD-style folder or file, or a JSONL/CSV file.")
    format: str = Field(default="auto", description="auto, beir, squad, jsonl or csv.")
    split: str = Field(default="test", description="qrels split for BEIR folders.")
    limit: int | None = Field(default=None, ge=1, description="Use only the first N questions.")


class CorpusConfig(StrictModel):
    name: str | None = Field(default=None, description="A corpus ingested with `ragkit ingest`.")
    path: str | None = Field(default=None, description="Files or a folder to ingest (content-addressed, so cheap).")

    @model_validator(mode="after")
    def _exactly_one(self) -> CorpusConfig:
        if (self.name is None) == (self.path is None):
            raise ValueError("corpus needs exactly one of 'name' (an ingested corpus) or 'path' (files to ingest)")
        return self


def _specs(value: Any) -> Any:
    # Accept the shorthand `- bm25` for `- {type: bm25}`; anything else that is not a list is
    # left for pydantic to reject with the field's name.
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        return value
    return [{"type": item} if isinstance(item, str) else item for item in value]


# `embedders: [auto]` (or {type: auto, params: {ollama_model: ...}}): an Ollama embedding model
# when a server answers at the configured URL, else the bundled MiniLM; decided when the config
# is loaded, so the run ids and the results name the embedder that was really used.
AUTO_EMBEDDER = "auto"
AUTO_OLLAMA_MODEL = "nomic-embed-text"


def resolve_auto_embedder(spec: dict[str, Any]) -> dict[str, Any]:
    from ragkit.llms.defaults import ollama_answers  # a probe of at most half a second
    from ragkit.settings import get_settings

    params = dict(spec.get("params") or {})
    model = params.pop("ollama_model", AUTO_OLLAMA_MODEL)
    if params or set(spec) - {"type", "params"}:
        extra = sorted(set(params) | (set(spec) - {"type", "params"}))
        raise ValueError(f"embedder 'auto' takes only params.ollama_model, got {quoted(extra)}")
    url = get_settings().ollama_url
    if ollama_answers(url):
        return {"type": "ollama", "params": {"model_name": model, "base_url": url}}
    return {"type": "minilm"}


def _embedder_specs(value: Any) -> Any:
    value = _specs(value)
    if not isinstance(value, list):
        return value
    return [resolve_auto_embedder(item) if isinstance(item, dict) and item.get("type") == AUTO_EMBEDDER else item
            for item in value]


# The generator answers questions; it is configured by `generator`, not toggled as a judge.
GENERATOR = "generator"
# The order grid points and pairs list a judge's modes in: off (the baseline) first.
MODE_ORDER = ("off", "heuristic", "llm", "cross_encoder", "nli")
# Modes that load a local model folder (a judge's model_path / nli_model_path must be set).
MODEL_MODES = ("cross_encoder", "nli")


def judge_names() -> list[str]:
    """The judges an experiment can name: registered and with a place in the pipeline."""
    return [name for name in judge_registry.names() if name != GENERATOR and name in PIPELINE_SLOTS]


class JudgeChoice(StrictModel):
    """Which modes of one judge the grid runs, and the judge's parameters.

    Written as `retrieval: llm`, `retrieval: both` (off and the judge's strongest mode),
    `{mode: [off, heuristic, llm], params: {...}}` or `{enabled: true|false|both}`.
    """

    mode: list[str] = Field(min_length=1, description="Modes to run: off, heuristic, llm, or both (off + strongest).")
    params: dict[str, Any] | list[dict[str, Any]] = Field(
        default_factory=dict,
        description="The judge's parameters (except mode); a list of parameter sets runs each one "
        "(e.g. [{on_fail: off}, {on_fail: re_retrieve}] to toggle an option of the judge).",
    )

    def variants(self) -> list[dict[str, Any]]:
        return self.params if isinstance(self.params, list) else [self.params]

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        if isinstance(value, (str, bool, list)):
            value = {"mode": value}
        if isinstance(value, dict) and "enabled" in value:
            value = dict(value)
            enabled = value.pop("enabled")
            if "mode" in value:
                raise ValueError("give either 'enabled' or 'mode', not both")
            value["mode"] = {True: "on", False: "off"}.get(enabled, enabled)
        if isinstance(value, dict) and not isinstance(value.get("mode"), list) and "mode" in value:
            value = {**value, "mode": [value["mode"]]}
        if isinstance(value, dict) and isinstance(value.get("mode"), list):
            # YAML 1.1 reads an unquoted off / on as a boolean: [off, llm] arrives as [False, "llm"].
            value = {**value, "mode": [{False: "off", True: "on"}.get(m, m) if isinstance(m, bool) else m
                                       for m in value["mode"]]}
        return value


def judge_specs(name: str, choice: JudgeChoice) -> list[ComponentSpec]:
    """One resolved spec per mode, in the order off, heuristic, llm; `both`/`on` expanded."""
    cls: type[Judge] = judge_registry.get(name)
    strongest = "llm" if "llm" in cls.modes else cls.modes[-1]
    variants = choice.variants()
    if not variants:
        raise ConfigError(f"judges.{name}: params is an empty list; give one parameter set or more")
    if any("mode" in params for params in variants):
        raise ConfigError(f"judges.{name}: set the mode with 'mode', not inside params")
    modes: set[str] = set()
    for mode in choice.mode:
        mode = str(mode).lower()
        shorthands = {"both": ["off", strongest], "on": [strongest], "true": [strongest], "false": ["off"]}
        expanded = shorthands.get(mode, [mode])
        for item in expanded:
            if item not in cls.modes:
                valid = ", ".join([*cls.modes, "both"])
                raise ConfigError(f"judges.{name}: no mode '{clipped(item)}'. Valid modes: {valid}")
            modes.add(item)
    ordered = [mode for mode in MODE_ORDER if mode in modes]
    specs: dict[str, ComponentSpec] = {}
    for mode in ordered:
        # A judge that is off has no parameters in effect: one off spec whatever the variants.
        for params in variants[:1] if mode == "off" else variants:
            spec = _at(f"judges.{name}", judge_registry.resolve, {"type": name, "params": {**params, "mode": mode}})
            specs.setdefault(spec.model_dump_json(), spec)
    return list(specs.values())


def _at(field: str, resolve: Callable[[Any], ComponentSpec], spec: Any) -> ComponentSpec:
    """``resolve(spec)``, a ConfigError naming the config field the spec was written in."""
    try:
        return resolve(spec)
    except ConfigError as error:
        raise ConfigError(f"{field}: {error}") from None


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
        valid_roles = [*judge_names(), GENERATOR, "evaluation"]
        unknown = sorted(set(self.roles) - set(valid_roles))
        if unknown:
            raise ConfigError(f"llm.roles: unknown role {quoted(unknown)}. Valid roles: {', '.join(valid_roles)}")
        return LLMConfig(
            default=_at("llm.default", llm_registry.resolve, self.default) if self.default is not None else None,
            roles={role: _at(f"llm.roles.{role}", llm_registry.resolve, spec) for role, spec in self.roles.items()},
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

    _shorthand_specs = field_validator("chunkers", "retrievers", mode="before")(_specs)
    _embedder_shorthand = field_validator("embedders", mode="before")(_embedder_specs)

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
            needing = [s.type for s in self.retrievers if retrievers.get(s.type).uses_embedder]
            if needing:
                raise ValueError(f"retrievers {needing} need an embedder: add one to 'embedders' (e.g. minilm)")
            if any(point_switches(self, name) for name in ("strategy", "quality_gate")):
                raise ValueError("switching retrieval strategy (the strategy judge or quality_gate.switch_strategy) "
                                 "may use dense or hybrid retrieval: add an embedder to 'embedders' (e.g. minilm)")
        if "groundedness" in self.judges and self.generator is None:
            specs = judge_specs("groundedness", self.judges["groundedness"])
            needs_answer = [s for s in specs if s.params["mode"] != "off"]
            if needs_answer:
                raise ValueError("judge 'groundedness' checks generated answers: set 'generator: true'")
        needs_generator = [name for name in ("router", "answer_check")
                           if name in self.judges and any(s.params["mode"] != "off"
                                                          for s in judge_specs(name, self.judges[name]))]
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
        unknown = sorted(set(self.judges) - set(judge_names()))
        check_judge_places(unknown)  # a plugin's judge the pipeline would never run
        if unknown:
            raise ConfigError(f"judges: unknown judge {quoted(unknown)}. Valid judges: {', '.join(judge_names())}")
        generator = self.generator
        return {
            "chunkers": [_at(f"chunkers.{i}", chunkers.resolve, s) for i, s in enumerate(self.chunkers)],
            "embedders": [_at(f"embedders.{i}", embedders.resolve, s) for i, s in enumerate(self.embedders)],
            "retrievers": [_at(f"retrievers.{i}", retrievers.resolve, s)
                           for i, s in enumerate(self.retrievers)],
            "judges": {name: judge_specs(name, choice) for name, choice in sorted(self.judges.items())},
            "generator": _at("generator", judge_registry.resolve, generator) if generator is not None else None,
            "llm": self.llm.resolved(),
            "web": _at("web", web_providers.resolve, self.web) if self.web is not None else None,
        }


def point_switches(config: ExperimentConfig, judge: str) -> bool:
    """Some grid point of ``config`` lets ``judge`` switch the retrieval strategy."""
    if judge not in config.judges:
        return False
    specs = [spec for spec in judge_specs(judge, config.judges[judge]) if spec.params["mode"] != "off"]
    return any(judge == "strategy" or spec.params.get("switch_strategy") for spec in specs)


class GridPoint(BaseModel):
    """One configuration of the grid, fully resolved (every default filled in)."""

    model_config = ConfigDict(frozen=True)

    chunker: ComponentSpec
    embedder: ComponentSpec | None
    retriever: ComponentSpec
    top_k: int
    # Every judge named in the config, in name order, each with its mode for this point.
    judges: tuple[ComponentSpec, ...] = ()
    generator: ComponentSpec | None = None
    evaluation: EvaluationParams | None = None
    # The web search provider, on the points whose router or quality gate may search the web.
    web: ComponentSpec | None = None

    def uses_web(self) -> bool:
        """The router can route to the web, or the quality gate falls back to it."""
        gate = self.judge("quality_gate")
        return self.judge("router") is not None or (gate is not None and bool(gate.params.get("web_fallback")))

    def switches_strategy(self) -> bool:
        """Retrieval may change strategy per query: the strategy judge, or the gate's switch map."""
        gate = self.judge("quality_gate")
        return self.judge("strategy") is not None or (gate is not None and bool(gate.params.get("switch_strategy")))

    def active_judges(self) -> tuple[ComponentSpec, ...]:
        """The judges that do something here: a judge that is off is as if it were not configured."""
        return tuple(spec for spec in self.judges if spec.params.get("mode") != "off")

    def judge(self, name: str) -> ComponentSpec | None:
        return next((spec for spec in self.active_judges() if spec.type == name), None)


def expand_grid(config: ExperimentConfig) -> list[GridPoint]:
    """chunkers x embedders x retrievers x top_k x each judge's modes, deduplicated.

    A retriever that ignores vectors (bm25) gets no embedder, so it is not repeated once per
    embedder in the grid.
    """
    parts = config.resolved_components()
    points: dict[str, GridPoint] = {}
    judge_options = list(itertools.product(*parts["judges"].values()))
    for chunker, embedder, retriever, top_k, judges in itertools.product(
        parts["chunkers"], parts["embedders"] or [None], parts["retrievers"], config.top_k, judge_options
    ):
        retriever_cls = retrievers.get(retriever.type)
        params = retrievers.resolve({"type": retriever.type, "params": {**retriever.params, "top_k": top_k}})
        point = GridPoint(
            chunker=chunker, embedder=embedder, retriever=params, top_k=top_k, judges=tuple(judges),
            generator=parts["generator"], evaluation=config.evaluation, web=parts["web"],
        )
        # Only what a point uses is part of it: a retriever that ignores vectors keeps its
        # embedder only when retrieval may switch to a strategy that reads them.
        point = point.model_copy(update={
            "embedder": embedder if retriever_cls.uses_embedder or point.switches_strategy() else None,
            "web": parts["web"] if point.uses_web() else None,
        })
        points.setdefault(point.model_dump_json(), point)
    return list(points.values())


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    target = data
    for depth, key in enumerate(keys[:-1]):
        if target.get(key) is None:
            target[key] = {}
        elif not isinstance(target[key], dict):
            section = clipped(".".join(keys[: depth + 1]))
            kind = type(target[key]).__name__
            raise ConfigError(f"--set {clipped(dotted)}: '{section}' is a {kind}, not a section with keys")
        target = target[key]
    target[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`dotted.key=value`, the value read as YAML (so numbers, lists and booleans work)."""
    if "=" not in text:
        raise ConfigError(f"--set expects dotted.key=value, got '{clipped(text)}'")
    key, raw = (part.strip() for part in text.split("=", 1))
    if not all(key.split(".")):
        raise ConfigError(f"--set {clipped(text)}: '{clipped(key)}' is not a dotted.key (e.g. dataset.limit=5)")
    return key, load_yaml(raw, f"--set {key}: value {quoted(raw)}") if raw else ""


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    for section, field in PATH_FIELDS:
        block = data.get(section)
        if isinstance(block, dict) and isinstance(block.get(field), str):
            path = Path(block[field]).expanduser()
            block[field] = str(path if path.is_absolute() else (base / path).resolve())


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"experiment file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"experiment file {path} is a folder, not a YAML file")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
                          "save it as UTF-8") from None
    except OSError as error:
        raise ConfigError(f"experiment file {path} cannot be read: {error.strerror}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of fields (name, dataset, ...) at the top level, "
                          f"got a YAML {type(data).__name__}")
    _resolve_paths(data, path.parent.resolve())
    for text in overrides or []:
        key, value = parse_override(text)
        _set_dotted(data, key, value)
    # Paths from the file are absolute by now, so only relative --set values change here.
    _resolve_paths(data, Path.cwd())
    return config_from_dict(data, source=str(path))


def config_from_dict(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source}: {validation_problems(error, 'field', '(top level)', ExperimentConfig)}") from None


def config_to_yaml(config: ExperimentConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=False), sort_keys=False)
