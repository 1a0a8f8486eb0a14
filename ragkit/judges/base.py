"""What every judge shares: off / heuristic / llm modes and the judgement record.

A judge is a real ablation: ``mode: off`` must behave exactly as if the judge did not exist, and
a reply that cannot be parsed falls back to the judge-off behaviour and is recorded as invalid,
never scored as a pass or a fail.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from ragkit.errors import ConfigError
from ragkit.llms.calls import LLMClient, LLMResult
from ragkit.llms.parsing import ModelT
from ragkit.registry import Component, ComponentParams, Registry

# Every mode any judge has; each judge lists the ones it implements in ``modes`` (checked on
# construction). Model modes run a local model folder instead of asking the LLM.
JudgeMode = Literal["off", "heuristic", "llm", "cross_encoder", "nli"]


class JudgeParams(ComponentParams):
    mode: JudgeMode = Field(
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
class JudgeTrace:
    """The judgements one question produced, in order."""

    judgements: list[Judgement] = field(default_factory=list)

    def add(self, judgement: Judgement) -> Judgement:
        self.judgements.append(judgement)
        return judgement


class Judge(Component):
    """Base of every judge. ``llm`` is an LLMClient (cache, timing, tokens), passed explicitly."""

    kind: ClassVar[str] = "judge"
    Params: ClassVar[type[JudgeParams]] = JudgeParams
    params: JudgeParams
    # The modes this judge implements; "off" always exists.
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")

    def __init__(self, params: JudgeParams, llm: LLMClient | None = None) -> None:
        self.params = params
        if params.mode not in self.modes:
            raise ValueError(f"judge '{self.name}' has no mode '{params.mode}'. Valid modes: {', '.join(self.modes)}")
        if params.mode == "llm" and llm is None:
            raise ValueError(f"judge '{self.name}' in mode 'llm' needs an LLM client")
        self.llm = llm

    @property
    def enabled(self) -> bool:
        return self.params.mode != "off"

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
    def _final_depth(cls, params: JudgeParams, depth: int, top_k: int) -> int:
        """Override in a judge that changes how many chunks go on; by default it keeps the depth.

        ``params`` is an instance of ``cls.Params`` (``final_depth`` checked it)."""
        return depth

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


judges: Registry[Judge] = Registry("judge")

# The places where the pipeline runs a judge, in pipeline order: the chunk step of the plan, then
# ``ragkit.pipeline.Pipeline`` (router, condense, strategy, the query transforms, the quality
# gate, the Retrieval Judge, rerank, enrichment, the generator, groundedness, the answer check).
# Each place calls the judge registered under its name. Judges do not declare a place of their
# own yet, so a judge registered under any other name (a plugin's, through the ``ragkit.judges``
# entry points) would validate and multiply the grid but never run: its runs would be judge-off
# runs under another id. The config refuses it (``check_judge_places``).
PIPELINE_SLOTS = ("chunking", "router", "condense", "strategy", "hyde", "multi_query", "quality_gate", "retrieval",
                  "rerank", "enrichment", "generator", "groundedness", "answer_check")


def check_judge_places(names: list[str], where: str = "judges") -> None:
    """Raise a one-line ConfigError for the registered judges among ``names`` that have no place
    in the pipeline (``PIPELINE_SLOTS``); names nobody registered are left to the caller."""
    registered = set(judges.names())
    placeless = sorted(name for name in names if name in registered and name not in PIPELINE_SLOTS)
    if placeless:
        places = ", ".join(slot for slot in PIPELINE_SLOTS if slot != "generator")
        named = ", ".join(f"'{name}'" for name in placeless)
        has, it = ("has", "it") if len(placeless) == 1 else ("have", "they")
        raise ConfigError(f"{where}: {named} {has} no place in the pipeline, so {it} would never run (registered "
                          f"through the entry-point group {judges.group}). The pipeline runs judges at: {places}")
