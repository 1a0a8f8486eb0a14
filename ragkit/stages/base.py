"""What every stage shares: off / heuristic / llm modes, its declared place, the judgement record.

A stage (a judge, the generator, a query transform...) is a real ablation: ``mode: off`` must
behave exactly as if the stage did not exist, and a reply that cannot be parsed falls back to the
stage-off behaviour and is recorded as invalid, never scored as a pass or a fail.

Each stage declares where it runs (``role``, one of ``ragkit.stages.roles.ROLES``) and implements
that role's protocol; the pipeline wires the stages an experiment names by role, so a stage
registered by a plugin runs where it says.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import Any, ClassVar, Literal

from pydantic import Field

from ragkit.llms.calls import LLMClient, LLMResult
from ragkit.llms.parsing import ModelT
from ragkit.registry import Component, ComponentParams, Registry

# Every mode any judge has; each judge lists the ones it implements in ``modes`` (checked on
# construction). Model modes run a local model folder instead of asking the LLM.
StageMode = Literal["off", "heuristic", "llm", "cross_encoder", "nli"]


class StageParams(ComponentParams):
    mode: StageMode = Field(
        default="llm", description="off: judge-free baseline; heuristic: a rule, no LLM; llm: ask the model; "
        "cross_encoder / nli: a local model (the judges that have them)."
    )
    prompt_version: int = Field(default=1, ge=1, le=1000, description="Bump to invalidate cached decisions.")


@dataclass
class Judgement:
    """One decision, as stored in the results' ``judgements`` table."""

    judge: str
    input_summary: str
    decision: dict[str, Any]
    raw_reply: str | None = None
    valid: bool = True
    error: str | None = None
    fell_back: bool = False  # the judge-off behaviour was used (bad reply, or a failed heuristic)
    seconds: float = 0.0
    cache_hit: bool = False

    def as_row(self) -> dict[str, Any]:
        return {
            "judge": self.judge, "input_summary": self.input_summary, "decision": self.decision,
            "raw_reply": self.raw_reply, "valid": self.valid, "error": self.error,
            "fell_back": self.fell_back, "seconds": self.seconds, "cache_hit": self.cache_hit,
        }


@dataclass
class JudgementLog:
    """The judgements one question produced, in order."""

    judgements: list[Judgement] = field(default_factory=list)

    def add(self, judgement: Judgement) -> Judgement:
        self.judgements.append(judgement)
        return judgement


class StageInfo(Component):
    """What every stage declares, readable without importing the stage's module: its params, modes,
    place (role, order), what it needs built, and the plan-time rules (does it
    call the LLM, how many chunks it passes on). A built-in stage's declarations live in a light
    *info* class (``ragkit.stages.<group>.params``) that the stage class subclasses, so a config is
    validated and planned without LlamaIndex (``ragkit.registry``, ``judges.info``)."""

    kind: ClassVar[str] = "judge"
    Params: ClassVar[type[StageParams]] = StageParams
    # The modes this judge implements; "off" always exists.
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")
    # Where the stage runs (a ``ragkit.stages.roles`` role): checked when an experiment names the
    # stage. No role: refused, never run. It reads and returns what its role does
    # (``roles.reads_of``, ``roles.writes_of``); ``inputs`` / ``outputs`` narrow that to a subset.
    role: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...] | None] = None
    outputs: ClassVar[tuple[str, ...] | None] = None
    # Its place among the stages of one role (lower first; then by name): built-ins use 10, 20...
    order: ClassVar[int] = 100
    # What its constructor takes besides params and llm, from ``ragkit.stages.wiring.RESOURCES``.
    needs: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def calls_llm(cls, params: Mapping[str, Any]) -> bool:
        """Whether a stage with these params (as an experiment writes them) asks the LLM, so the
        plan gives it its role's model: mode llm, unless a stage says otherwise."""
        return params.get("mode") == "llm"

    @classmethod
    def llm_calls_per_question(cls, params: Mapping[str, Any]) -> int:
        """The LLM calls one question makes through a stage with these params (as an experiment
        writes them), for the dry run: one, unless a stage's design makes several per question (a
        loop counted at its stated bound); retries after a failed check are not counted."""
        return 1

    @classmethod
    def final_depth(cls, params: ComponentParams, depth: int, top_k: int) -> int:
        """The most chunks this judge passes on when it receives at most ``depth``, ``top_k``
        being the base retriever's list length (for a judge that retrieves again).

        ``params`` are this judge's (``judges.validate_params`` of its name), so an instance of ``Params``.
        It counts what the judge's decisions can produce: a reply the judge cannot use passes the
        judge-off list on, which metrics cut at depth like any longer list. Off changes nothing."""
        if not isinstance(params, cls.Params):
            raise TypeError(f"judge '{cls.name}': final_depth needs {cls.Params.__name__}, got {type(params).__name__}")
        return depth if params.mode == "off" else cls._final_depth(params, depth, top_k)

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        """Override in a judge that changes how many chunks go on; by default it keeps the depth.

        ``params`` is an instance of ``cls.Params`` (``final_depth`` checked it)."""
        return depth


class Stage(StageInfo):
    """Base of every stage. ``llm`` is an LLMClient (cache, timing, tokens), passed explicitly."""

    params: StageParams

    def __init__(self, params: StageParams, llm: LLMClient | None = None) -> None:
        self.params = params
        if params.mode not in self.modes:
            raise ValueError(f"judge '{self.name}' has no mode '{params.mode}'. Valid modes: {', '.join(self.modes)}")
        if params.mode == "llm" and llm is None:
            raise ValueError(f"judge '{self.name}' in mode 'llm' needs an LLM client")
        self.llm = llm

    @property
    def enabled(self) -> bool:
        return self.params.mode != "off"

    def ask(self, prompt: str, schema: type[ModelT], *, system: str | None = None,
            max_tokens: int | None = None) -> LLMResult[ModelT]:
        """One schema-constrained call, recorded under this judge's stage name."""
        return self.llm_client().call(prompt, stage=f"judge:{self.name}", schema=schema, system=system,
                                      max_tokens=max_tokens, cache_salt=self.cache_salt())

    def llm_client(self) -> LLMClient:
        """The LLM client, for the calls of mode ``llm`` (``__init__`` made sure that mode has one)."""
        if self.llm is None:
            raise ValueError(f"judge '{self.name}' in mode '{self.params.mode}' has no LLM client")
        return self.llm

    def cache_salt(self) -> str | None:
        """Bumping ``prompt_version`` asks the model again instead of reusing cached replies."""
        version = self.params.prompt_version
        return None if version == 1 else f"{self.name}:prompt_version={version}"

    def fallback(self, input_summary: str, decision: dict[str, Any], result: LLMResult | None,
                 started: float, error: str | None) -> Judgement:
        """The record of a reply that could not be used: invalid, and the judge-off output was returned."""
        judgement = self.judgement(input_summary, {**decision, "action": "fell back"}, result, started=started,
                                   fell_back=True, error=error)
        judgement.valid = False
        return judgement

    def judgement(self, input_summary: str, decision: dict[str, Any], result: LLMResult | None = None,
                  *, started: float, fell_back: bool = False, error: str | None = None) -> Judgement:
        return Judgement(
            judge=self.name,
            input_summary=input_summary[:500],
            decision=decision,
            raw_reply=result.text if result else None,
            valid=result.valid if result else error is None,
            error=error or (result.parse_error if result else None),
            fell_back=fell_back,
            seconds=time.perf_counter() - started,
            cache_hit=result.cache_hit if result else False,
        )


# Built-in stages, registered in code (imported on first use) as well as through the
# ``ragkit.judges`` entry points: a stale or missing entry point (an install made before a module
# moved) cannot hide or break one. Plugins register through the entry points only.
BUILT_IN_STAGES = {
    "chunking": "ragkit.stages.chunking.stage:ChunkingJudge",
    "router": "ragkit.stages.query.router.stage:RouterJudge",
    "condense": "ragkit.stages.query.condense:CondenseJudge",
    "profile": "ragkit.stages.query.profile:ProfileJudge",
    "strategy": "ragkit.stages.query.strategy:StrategyJudge",
    "hyde": "ragkit.stages.query.transforms:HyDERetriever",
    "multi_query": "ragkit.stages.query.transforms:MultiQueryRetriever",
    "quality_gate": "ragkit.stages.retrieval.quality_gate.stage:QualityGate",
    "retrieval": "ragkit.stages.retrieval.retrieval_judge:RetrievalJudge",
    "rerank": "ragkit.stages.context.rerank:RerankJudge",
    "enrichment": "ragkit.stages.context.enrichment:EnrichmentJudge",
    "compression": "ragkit.stages.context.compression:CompressionJudge",
    "generator": "ragkit.stages.answer.generator:Generator",
    "groundedness": "ragkit.stages.answer.groundedness:GroundednessJudge",
    "answer_check": "ragkit.stages.answer.answer_check:AnswerCheckJudge",
}


# Each built-in's light info class (``StageInfo``: params, modes, role, plan-time rules), a base
# of its stage class in a module without LlamaIndex: validating a config and planning a grid read
# these, so a finished grid's re-run never imports a stage module (``Registry.info``).
BUILT_IN_STAGE_INFOS = {
    "chunking": "ragkit.stages.chunking.params:ChunkingJudgeInfo",
    "router": "ragkit.stages.query.params:RouterJudgeInfo",
    "condense": "ragkit.stages.query.params:CondenseJudgeInfo",
    "profile": "ragkit.stages.query.params:ProfileJudgeInfo",
    "strategy": "ragkit.stages.query.params:StrategyJudgeInfo",
    "hyde": "ragkit.stages.query.params:HyDERetrieverInfo",
    "multi_query": "ragkit.stages.query.params:MultiQueryRetrieverInfo",
    "quality_gate": "ragkit.stages.retrieval.params:QualityGateInfo",
    "retrieval": "ragkit.stages.retrieval.params:RetrievalJudgeInfo",
    "rerank": "ragkit.stages.context.params:RerankJudgeInfo",
    "enrichment": "ragkit.stages.context.params:EnrichmentJudgeInfo",
    "compression": "ragkit.stages.context.params:CompressionJudgeInfo",
    "generator": "ragkit.stages.answer.params:GeneratorInfo",
    "groundedness": "ragkit.stages.answer.params:GroundednessJudgeInfo",
    "answer_check": "ragkit.stages.answer.params:AnswerCheckJudgeInfo",
}


class StageRegistry(Registry[Stage, StageInfo]):
    """The judge registry: the entry points, with the built-ins' in-code targets taking precedence."""

    def _entry_points(self) -> dict[str, Any]:
        return {**super()._entry_points(),
                **{name: EntryPoint(name, target, self.group) for name, target in BUILT_IN_STAGES.items()}}


STAGES: StageRegistry = StageRegistry("judge", infos=BUILT_IN_STAGE_INFOS)
