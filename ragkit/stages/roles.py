"""The places a stage can run, in pipeline order: what each place gives a stage, what it takes
back, and the call the pipeline makes (one ``typing.Protocol`` per role).

A stage class declares ``role`` (one of ``ROLES``) and implements its role's protocol: mypy checks
every built-in against it (``ragkit.stages.conformance``), and a plugin's author checks theirs the
same way (``_: type[ContextRole] = MyStage`` under ``if TYPE_CHECKING:``). What a stage reads and
returns is its role's ``reads`` and ``writes`` (``reads_of``, ``writes_of``), unless it declares
``inputs`` / ``outputs`` to narrow them (a strategy stage that does not read the profile). The
pipeline (``ragkit.pipeline.pipeline.Pipeline``) calls the stages of each role, in role order, through the
role's protocol; within a role, by the stages' ``order`` and then their names. So a stage a
plugin registers runs where it says, and a stage with no role, or one the pipeline does not have,
is refused with one line naming the valid roles instead of validating and never running.

Roles that shape one decision (``single``) take at most one stage per configuration: two routers
or two generators would contradict each other.

Every type the protocols name is imported for annotations only: config validation and planning
import this module without LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ragkit.errors import ConfigError
from ragkit.quoting import clipped

if TYPE_CHECKING:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import Document, NodeWithScore, QueryBundle

    from ragkit.registry import ComponentSpec
    from ragkit.stages.answer.generator import Answer
    from ragkit.stages.answer.params import AnswerCheckParams, GroundednessParams
    from ragkit.stages.base import Judgement, JudgementLog, Stage
    from ragkit.stages.prompts import ConversationTurn
    from ragkit.stages.query.profile import QueryProfile
    from ragkit.stages.query.router.stage import RouteDecision
    from ragkit.stages.retrieval.quality_gate.params import QualityGateParams
    from ragkit.stages.retrieval.quality_gate.scoring import GateOutcome


# The protocols. Positional parameters are positional-only (``/``), so a stage may name them as it
# likes; keyword parameters are part of the call. ``trace`` is the question's log of judgements.


class StageRole(Protocol):
    """What every role's stage has: the name its steps and judgements are recorded under."""

    @property
    def name(self) -> str: ...


class ChunkingRole(StageRole, Protocol):
    def decide(self, document: Document, /) -> tuple[ComponentSpec, Judgement | None]: ...


class RouteRole(StageRole, Protocol):
    def route(self, question: str, history: Sequence[ConversationTurn], trace: JudgementLog, /) -> RouteDecision: ...


class FollowUpRole(StageRole, Protocol):
    def rewrite(self, question: str, history: Sequence[ConversationTurn], trace: JudgementLog, /) -> str: ...


class ProfileRole(StageRole, Protocol):
    def profile(self, query: str, trace: JudgementLog, /) -> QueryProfile | None: ...


class StrategyRole(StageRole, Protocol):
    """``profile`` is given only to a stage whose inputs include it (``reads_of``)."""

    def choose(self, query: str, trace: JudgementLog, /, profile: QueryProfile | None = None) -> str | None: ...


class TransformRole(StageRole, Protocol):
    """A retriever over the retriever (``ragkit.stages.wiring`` builds it around the one it wraps)."""

    def retrieve(self, query: str | QueryBundle, /) -> list[NodeWithScore]: ...


class GateRole(StageRole, Protocol):
    """After ``run``, ``outcome`` says whether an attempt passed, its quality and its strategy."""

    @property
    def params(self) -> QualityGateParams: ...

    @property
    def outcome(self) -> GateOutcome: ...

    def run(self, query: str, retrieve: Callable[[str], list[NodeWithScore]], trace: JudgementLog, /,
            switch: Callable[[str], None] | None = None, strategy: str | None = None,
            reranked_by: Sequence[str] | None = None) -> list[NodeWithScore]: ...


class RefineRole(StageRole, Protocol):
    def refine(self, query: str, nodes: list[NodeWithScore], retriever: BaseRetriever, trace: JudgementLog, /,
               history: Sequence[ConversationTurn] = ()) -> list[NodeWithScore]: ...


class ContextRole(StageRole, Protocol):
    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog, /) -> list[NodeWithScore]: ...


class GenerateRole(StageRole, Protocol):
    """An answer from chunks (``feedback``: what a retry must not repeat), an abstention with its
    reason, and a conversational reply without sources (the router's conversational route)."""

    def generate(self, question: str, nodes: list[NodeWithScore], trace: JudgementLog, /, *,
                 feedback: Sequence[str] | None = None, history: Sequence[ConversationTurn] = ()) -> Answer: ...

    def abstain(self, question: str, reason: str, trace: JudgementLog, /) -> Answer: ...

    def converse(self, question: str, history: Sequence[ConversationTurn], trace: JudgementLog, /) -> Answer: ...


class VerifyRole(StageRole, Protocol):
    """``judge``: the answer's supported share and the judgement (None, None when off); ``params``
    drive hallucination correction (``ragkit.stages.answer.correction``)."""

    @property
    def params(self) -> GroundednessParams: ...

    def judge(self, question: str, answer: str | None, contexts: Sequence[str] | None, trace: JudgementLog,
              /) -> tuple[float | None, Judgement | None]: ...


class CheckRole(StageRole, Protocol):
    """``check``: the answer's grades; ``grade``: the same with the judgement, for the late tier
    (``ragkit.stages.answer.answer_retry``), which ``params`` drive."""

    @property
    def params(self) -> AnswerCheckParams: ...

    def check(self, question: str, answer: str, contexts: Sequence[str], trace: JudgementLog,
              /) -> dict[str, float | None]: ...

    def grade(self, question: str, answer: str, contexts: Sequence[str], trace: JudgementLog,
              /) -> tuple[dict[str, float | None], Judgement | None]: ...


@dataclass(frozen=True)
class Role:
    name: str
    group: str  # the package under ragkit/stages/ and the section of the experiment form
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    protocol: type  # the role's Protocol: what the pipeline calls
    single: bool
    what: str


# In pipeline order. The chunking role runs in the plan's chunk step (before any index exists);
# the others per question, in ``ragkit.pipeline.pipeline.Pipeline``.
ROLES: tuple[Role, ...] = (
    Role("chunking", "chunking", ("document",), ("chunker",), ChunkingRole, True,
         "chooses the chunker for each document, when the chunk set is built"),
    Role("route", "query", ("question", "history", "documents"), ("route",), RouteRole, True,
         "sends a question to the documents, a conversational answer or the web"),
    Role("follow_up", "query", ("question", "history"), ("query",), FollowUpRole,
         False, "rewrites a follow-up and its conversation into a standalone query (questions with history)"),
    Role("profile", "query", ("query",), ("profile",), ProfileRole, True,
         "profiles the query (intent, complexity) beside the documents (type, technical density, topics)"),
    Role("strategy", "query", ("query", "profile"), ("strategy",), StrategyRole, True,
         "chooses dense, bm25 or hybrid search for the query, over the same index"),
    Role("transform", "query", ("query",), ("nodes",), TransformRole,
         False, "searches with rewrites of the query and fuses the results"),
    Role("gate", "retrieval", ("query", "nodes"), ("nodes", "quality"), GateRole, True,
         "checks the results and retries with a reformulated query or another strategy"),
    Role("refine", "retrieval", ("query", "nodes", "history"), ("nodes",), RefineRole, False,
         "filters, re-ranks or asks for more results"),
    Role("context", "context", ("query", "nodes"), ("nodes",), ContextRole, False,
         "reorders, cuts or extends the chunks the generator reads"),
    Role("generate", "answer", ("question", "history", "nodes", "quality"), ("answer",), GenerateRole, True,
         "writes the answer"),
    Role("verify", "answer", ("question", "answer", "nodes"), ("groundedness", "answer", "nodes"), VerifyRole, True,
         "checks the answer against its context and corrects it"),
    Role("check", "answer", ("question", "answer", "nodes"), ("answer_check", "answer", "nodes"), CheckRole, True,
         "grades the final answer (and may retry it: a new answer, from new chunks)"),
)
ROLE_NAMES = tuple(role.name for role in ROLES)
GROUP_TITLES = {"chunking": "Chunking", "query": "Query: routing and rewriting",
                "retrieval": "Retrieval and its judges", "context": "Context: reranking, enrichment and compression",
                "answer": "Answer: generation and its checks"}
_BY_NAME = {role.name: role for role in ROLES}


def role_of(cls: type[Stage] | Any, where: str = "judges") -> Role:
    """The role ``cls`` declares, its inputs and outputs checked against it; a one-line
    ConfigError otherwise (``cls`` may be a stage class or instance)."""
    name, declared = getattr(cls, "name", "") or type(cls).__name__, getattr(cls, "role", "")
    role = _BY_NAME.get(declared)
    if role is None:
        said = f"declares role '{clipped(str(declared))}'" if declared else "declares no role"
        raise ConfigError(f"{where}: '{name}' {said}, so the pipeline has no place to run it. "
                          f"Valid roles: {', '.join(ROLE_NAMES)}")
    for kind, declared_fields, allowed in (("reads", getattr(cls, "inputs", None) or (), role.reads),
                                           ("returns", getattr(cls, "outputs", None) or (), role.writes)):
        extra = [item for item in declared_fields if item not in allowed]
        if extra:
            raise ConfigError(f"{where}: '{name}' {kind} {', '.join(map(str, extra))}, which role '{role.name}' "
                              f"does not have. Role '{role.name}' {kind}: {', '.join(allowed)}")
    return role


def reads_of(cls: type[Stage] | Any) -> tuple[str, ...]:
    """What a stage reads: the ``inputs`` it declares, else everything its role reads."""
    return tuple(getattr(cls, "inputs", None) or role_of(cls).reads)


def writes_of(cls: type[Stage] | Any) -> tuple[str, ...]:
    """What a stage returns: the ``outputs`` it declares, else everything its role writes."""
    return tuple(getattr(cls, "outputs", None) or role_of(cls).writes)


def position(cls: type[Stage] | Any) -> tuple[int, int, str]:
    """Where a stage runs: its role's place in ``ROLES``, its order within the role, its name."""
    return ROLE_NAMES.index(role_of(cls).name), getattr(cls, "order", 100), getattr(cls, "name", "")


def in_pipeline_order(stages: Iterable[Any]) -> list[Any]:
    """Stage classes or instances sorted as the pipeline runs them; each role is checked."""
    return sorted(stages, key=position)


def check_single_roles(stages: Sequence[type[Stage] | Any], where: str = "judges") -> None:
    """Refuse two stages in one role that takes a single stage (two routers, two answer checks)."""
    taken: dict[str, list[str]] = {}
    for stage in stages:
        role = role_of(stage, where)
        if role.single:
            taken.setdefault(role.name, []).append(getattr(stage, "name", "") or type(stage).__name__)
    clashes = {role: names for role, names in taken.items() if len(names) > 1}
    if clashes:
        clash, names = next(iter(sorted(clashes.items())))
        raise ConfigError(f"{where}: {', '.join(map(repr, names))} all run in role '{clash}', which takes one "
                          "stage; keep one of them")


def by_role(stages: Sequence[Any]) -> dict[str, list[Any]]:
    """Stage instances grouped by role, each group in pipeline order; every role is a key."""
    check_single_roles(stages, "pipeline")
    grouped: dict[str, list[Any]] = {name: [] for name in ROLE_NAMES}
    for stage in in_pipeline_order(stages):
        grouped[role_of(stage).name].append(stage)
    return grouped
