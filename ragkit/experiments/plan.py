"""Planning is pure: a config, a corpus and a question set become content-keyed steps.

Chunk sets, indexes and runs are named by hashes of what they are made from, so steps shared by
several configurations appear once, and an executor can skip every step whose output exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast, overload

from ragkit.artefacts.index import AnnParams
from ragkit.chunkers.registry import chunkers, judge_choosable_chunkers
from ragkit.corpus.model import Corpus
from ragkit.embedders.base import embedders
from ragkit.experiments.baselines import first_listed_levels
from ragkit.experiments.config import GENERATOR, ExperimentConfig, GridPoint, expand_grid
from ragkit.hashing import content_key
from ragkit.llms.base import llms as llm_registry
from ragkit.metrics.generation import METRICS as GENERATION_METRICS
from ragkit.metrics.retrieval import scored_ks
from ragkit.questions import QuestionSet
from ragkit.registry import ComponentSpec, Registry
from ragkit.retrievers.registry import retrievers
from ragkit.stages.base import STAGES as judge_registry
from ragkit.stages.roles import position, role_of
from ragkit.stages.wiring import specs_in_role
from ragkit.web import web_providers

if TYPE_CHECKING:
    from ragkit.stages.base import StageInfo, StageParams

CHUNKING = "chunking"
EVALUATION = "evaluation"
# The roles whose stages shape the final context (ragkit.stages.roles), in pipeline order.
CONTEXT_ROLES = ("transform", "gate", "refine", "context")


@dataclass(frozen=True)
class ChunkStep:
    chunkset_id: str
    chunker: ComponentSpec
    # With the Chunking Judge on, `chunker` is its fallback and each document gets the judge's choice.
    judge: ComponentSpec | None = None
    judge_llm: ComponentSpec | None = None


@dataclass(frozen=True)
class IndexStep:
    index_id: str
    chunkset_id: str
    embedder: ComponentSpec | None
    # The ANN index to build on its vectors (None: exact search).
    ann: AnnParams | None = None
    # Some run of the plan searches its text (bm25, hybrid, or a strategy that may switch to them):
    # the full-text index is then built, as a step of its own charged to those runs only.
    fulltext: bool = True

    @property
    def fulltext_key(self) -> str:
        """The step record of its full-text index."""
        return f"{self.index_id}.fulltext"


def needs_fulltext(point: GridPoint) -> bool:
    """The run searches the chunks' text: bm25, hybrid, or a strategy that may switch to them."""
    return point.retriever.type in ("bm25", "hybrid") or point.switches_strategy()


@dataclass(frozen=True)
class RunStep:
    run_id: str
    point: GridPoint
    chunkset_id: str
    index_id: str
    # The LLM backend of each role that calls one in this run (judges in llm mode, generator).
    llms: dict[str, ComponentSpec] = field(default_factory=dict, hash=False, compare=False)
    # The depths of every run in the plan: each run scores those up to its own, so that any two
    # runs can be compared at their common depth.
    plan_depths: tuple[int, ...] = field(default=(), hash=False, compare=False)

    @cached_property
    def depth(self) -> int:
        return final_depth(self.point)

    @cached_property
    def ks(self) -> list[int]:
        """The cut-offs this run scores (``ragkit.metrics.retrieval.scored_ks``); not in its id."""
        return scored_ks(self.point.top_k, self.depth, self.plan_depths)


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
    # The experiment's named reference levels (``baseline:``) and each factor's first listed level,
    # written beside the results for the report (experiments.baselines).
    baselines: dict[str, str] = field(default_factory=dict)
    first_levels: dict[str, str] = field(default_factory=dict)

    @cached_property
    def search_depths(self) -> dict[str, int]:
        """Per search that runs differing only in top_k make (``shared_search_key``: the index, the
        retriever and its parameters but top_k), the deepest top_k among them: the search is made
        once at that depth, and the shallower runs keep its first hits where those are what their
        own search returns (``Retriever.share_searches``)."""
        depths: dict[str, int] = {}
        for run in self.runs:
            for spec in run.point.searchers():
                key = shared_search_key(run.index_id, spec)
                depths[key] = max(depths.get(key, 0), int(spec.params["top_k"]))
        return depths

    def search_depth(self, index_id: str, spec: ComponentSpec | dict[str, Any]) -> int:
        """How deep the plan searches for a retriever ``spec`` (resolved) over ``index_id``: its own
        top_k, or a sibling run's larger one (``search_depths``)."""
        spec = ComponentSpec.model_validate(spec)
        return max(int(spec.params["top_k"]), self.search_depths.get(shared_search_key(index_id, spec), 0))


def shared_search_key(index_id: str, spec: ComponentSpec) -> str:
    """A resolved retriever's search over ``index_id`` with its top_k left out."""
    params = {name: value for name, value in spec.params.items() if name != "top_k"}
    return content_key("shared-search", index_id, spec.type, params)


@overload
def component_key(kind: Registry, spec: ComponentSpec) -> str: ...


@overload
def component_key(kind: Registry, spec: None) -> None: ...


@overload
def component_key(kind: Registry, spec: ComponentSpec | None) -> str | None: ...


def component_key(kind: Registry, spec: ComponentSpec | None) -> str | None:
    if spec is None:
        return None
    cls = kind.info(spec.type)  # its declarations: the class itself is not imported for a key
    transport: frozenset[str] = getattr(cls.Params, "transport_fields", frozenset())
    params = {name: value for name, value in spec.params.items() if name not in transport}
    return content_key(kind.kind, spec.type, cls.key_version(spec.params), params)


def questions_key(questions: QuestionSet) -> str:
    return questions.content_key()


def chunker_uses_llm(spec: ComponentSpec) -> bool:
    """A chunker that asks an LLM where to cut (``llm_semantic``) or for chunk summaries: it runs
    on the chunking role's model, and that model is part of its chunk set's key."""
    return bool(getattr(chunkers.info(spec.type), "uses_llm", False) or spec.params.get("summaries"))


def roles_calling_llm(point: GridPoint) -> list[str]:
    """The roles of this grid point that call an LLM: judges in llm mode (or another mode that
    asks it, ``Judge.calls_llm``), an LLM chunker (the chunking role), and the generator."""
    roles = [spec.type for spec in point.active_judges() if judge_registry.info(spec.type).calls_llm(spec.params)]
    if chunker_uses_llm(point.chunker) and CHUNKING not in roles:
        roles.append(CHUNKING)
    if point.generator is not None:
        roles.append(GENERATOR)
    if point.evaluation is not None and any(GENERATION_METRICS[m].needs_llm for m in point.evaluation.metrics):
        roles.append(EVALUATION)
    return roles


def final_depth(point: GridPoint) -> int:
    """The most chunks the final context can hold: the retriever's top_k, then each judge's own
    rule (``Judge.final_depth``) in pipeline order, e.g. top_k 10 with rerank top_n 5 -> 5."""
    depth = point.top_k
    shaping = [spec for spec in point.active_judges() if role_of(judge_registry.info(spec.type)).name in CONTEXT_ROLES]
    for spec in sorted(shaping, key=lambda spec: position(judge_registry.info(spec.type))):
        # Validated by the judge's own Params model, which every judge derives from StageParams.
        params = cast("StageParams", judge_registry.validate_params(spec.type, spec.params))
        judge_cls: type[StageInfo] = judge_registry.info(spec.type)
        depth = judge_cls.final_depth(params, depth, point.top_k)
    return depth


def _llm_key(spec: ComponentSpec | None) -> str | None:
    return component_key(llm_registry, spec)


def make_plan(config: ExperimentConfig, corpus: Corpus, questions: QuestionSet,
              llm_roles: dict[str, ComponentSpec] | None = None) -> Plan:
    """``llm_roles``: the resolved backend of every role (see runner.resolve_llm_roles); a run's
    id covers the backend of each role it calls, so changing a model re-runs only those runs.

    Planning loads no model and computes nothing: the quickstart's 18 runs need 3 chunk sets::

        >>> from ragkit.corpus.store import CorpusStore
        >>> from ragkit.experiments.config import load_config
        >>> from ragkit.experiments.runner import load_corpus, load_questions, resolve_llm_roles
        >>> config = load_config("experiments/quickstart.yaml")
        >>> corpus = load_corpus(config, CorpusStore())
        >>> plan = make_plan(config, corpus, load_questions(config, corpus), resolve_llm_roles(config))
        >>> len(plan.runs), len(plan.chunk_steps), len(plan.index_steps)
        (18, 3, 6)
    """
    q_key = questions_key(questions)
    chunk_steps: dict[str, ChunkStep] = {}
    index_steps: dict[str, IndexStep] = {}
    runs: dict[str, RunStep] = {}
    llm_roles = llm_roles or {}
    for point in expand_grid(config):
        missing = [role for role in roles_calling_llm(point) if role not in llm_roles]
        if missing:
            raise ValueError(f"no LLM backend resolved for roles {missing}")
        llms = {role: llm_roles[role] for role in roles_calling_llm(point)}
        # The stage in the chunking role, if one is on (the Chunking Judge, or a plugin's).
        chunk_judge = next(iter(specs_in_role(point.active_judges(), CHUNKING)), None)
        # The judge's decisions are a function of the documents (corpus_id), its params, the
        # chunkers it may choose and its model, all in the key; the decisions themselves are
        # made (and cached) when the chunk set is built.
        judge_part = None if chunk_judge is None else (component_key(judge_registry, chunk_judge),
                                                       judge_choosable_chunkers(), _llm_key(llms.get(chunk_judge.type)))
        # An LLM chunker's cuts depend on its model too (chunkers without one keep their old keys).
        llm_part = ("llm", _llm_key(llms[CHUNKING])) if chunker_uses_llm(point.chunker) else None
        chunkset_id = content_key("chunkset", corpus.corpus_id, component_key(chunkers, point.chunker),
                                  *([judge_part] if judge_part else []), *([llm_part] if llm_part else []))
        # Approximate search changes results: an ANN setting is part of the index and run ids (an
        # index without vectors, or ANN off, keeps the ids it always had).
        ann = config.ann if config.ann.kind != "none" and point.embedder is not None else None
        ann_part = [("ann", ann.id_fields())] if ann is not None else []
        index_id = content_key("index", chunkset_id, component_key(embedders, point.embedder), *ann_part)
        # Judges that are off leave the id unchanged, so a judge-off run is the judge-free run.
        # Each entry is a tuple of key parts: (judge key, LLM key), or the evaluation's three.
        pipeline_part: list[tuple[Any, ...]] = [(component_key(judge_registry, spec), _llm_key(llms.get(spec.type)))
                                                for spec in point.active_judges() if spec != chunk_judge]
        if point.generator is not None:
            pipeline_part.append((component_key(judge_registry, point.generator), _llm_key(llms[GENERATOR])))
        if point.web is not None:  # only on points that may search the web
            pipeline_part.append(("web", component_key(web_providers, point.web)))
        if point.evaluation is not None:
            evaluation = point.evaluation.model_dump(mode="json")
            pipeline_part.append(("evaluation", evaluation, _llm_key(llms.get(EVALUATION))))
        chunking_part = chunkset_id if judge_part or llm_part else component_key(chunkers, point.chunker)
        # The question set is not part of the id: results are keyed per (run, question content),
        # so adding questions answers only the new ones and removing some reuses the rest.
        run_id = content_key(
            "run", corpus.corpus_id, chunking_part,
            component_key(embedders, point.embedder), component_key(retrievers, point.retriever),
            *([pipeline_part] if pipeline_part else []), *ann_part,
        )
        # The model of the Chunking Judge, or else of an LLM chunker (llm_semantic, summaries on):
        # the executor hands it to the chunker (ArtefactBuilds.chunkset).
        chunk_llm = llms.get(chunk_judge.type) if chunk_judge else llms.get(CHUNKING)
        chunk_steps.setdefault(chunkset_id, ChunkStep(chunkset_id, point.chunker, chunk_judge, chunk_llm))
        index_steps.setdefault(index_id, IndexStep(index_id, chunkset_id, point.embedder, ann, fulltext=False))
        if needs_fulltext(point):
            index_steps[index_id] = replace(index_steps[index_id], fulltext=True)
        runs.setdefault(run_id, RunStep(run_id, point, chunkset_id, index_id, llms))
    depths = tuple(sorted({run.depth for run in runs.values()}))
    return Plan(
        experiment=config.name,
        corpus=corpus,
        questions=questions,
        questions_key=q_key,
        chunk_steps=tuple(chunk_steps.values()),
        index_steps=tuple(index_steps.values()),
        runs=tuple(replace(run, plan_depths=depths) for run in runs.values()),
        shard_size=config.shard_size,
        baselines=dict(config.baseline),
        first_levels=first_listed_levels(config),
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
        "depth": step.depth,
    }
    for kind, spec, kinds in (("chunker", point.chunker, chunkers),
                              ("embedder", point.embedder, embedders),
                              ("retriever", point.retriever, retrievers)):
        if spec is None:
            continue
        # Every parameter, options added later at their default included (they are left out of
        # the spec and the run id), so `scope=all` reads as such beside `scope=question_doc`.
        shown = kinds.validate_params(spec.type, spec.params).model_dump(mode="json")
        for name, value in shown.items():
            row[f"{kind}.{name}"] = _cell(value)
    for spec in point.judges:
        mode = spec.params["mode"]
        row[f"judge.{spec.type}"] = mode
        if mode != "off":  # an off judge has no parameters in effect
            # Every parameter, options at their default included, so a toggled option reads
            # `on_fail=off` -> `on_fail=re_retrieve` rather than a missing value.
            shown = judge_registry.validate_params(spec.type, spec.params).model_dump(mode="json")
            for name, value in shown.items():
                if name != "mode":
                    row[f"judge.{spec.type}.{name}"] = _cell(value)
    ann = next((s.ann for s in plan.index_steps if s.index_id == step.index_id), None)
    if ann is not None:  # only where it is on: an exact run's row has no ann columns
        for name, value in ann.model_dump(mode="json").items():  # every knob, ef=None included
            row[f"ann.{name}"] = _cell(value)
    row["generator"] = point.generator is not None
    if point.generator is not None:
        # Its options added later, only where set away from their default (the resolved spec
        # holds only those), so a run that sets none has the row it always had.
        added = judge_registry.params_model(point.generator.type).added_fields
        for name in sorted(added & point.generator.params.keys()):
            row[f"generator.{name}"] = _cell(point.generator.params[name])
    if point.web is not None:
        row["web"] = point.web.type
    if point.evaluation is not None:
        row["evaluation"] = ",".join(point.evaluation.metrics)
        if point.evaluation.repeats > 1:
            row["evaluation.repeats"] = point.evaluation.repeats
    for role, spec in sorted(step.llms.items()):
        backend = llm_registry.build(spec)
        row[f"llm.{role}"] = f"{spec.type}:{backend.model_name}"
    return row


def _cell(value: object) -> object:
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
