"""The places a stage can run, in pipeline order, and what each place gives a stage and takes back.

A stage class declares ``role`` (one of ``ROLES``), ``inputs`` (what it reads, a subset of the
role's ``reads``) and ``outputs`` (what it returns, a subset of the role's ``writes``). The
pipeline (``ragkit.pipeline.Pipeline``) calls the stages of each role, in role order, through the
role's ``contract``; within a role, by the stages' ``order`` and then their names. So a stage a
plugin registers runs where it says, and a stage with no role, or one the pipeline does not have,
is refused with one line naming the valid roles instead of validating and never running.

Roles that shape one decision (``single``) take at most one stage per configuration: two routers
or two generators would contradict each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragkit.errors import ConfigError
from ragkit.quoting import clipped

if TYPE_CHECKING:
    from ragkit.stages.base import Judge


@dataclass(frozen=True)
class Role:
    name: str
    group: str  # the package under ragkit/stages/ and the section of the experiment form
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    contract: str  # what the pipeline calls
    single: bool
    what: str


# In pipeline order. The chunking role runs in the plan's chunk step (before any index exists);
# the others per question, in ``ragkit.pipeline.Pipeline``.
ROLES: tuple[Role, ...] = (
    Role("chunking", "chunking", ("document",), ("chunker",), "decide(document) -> chunker spec", True,
         "chooses the chunker for each document, when the chunk set is built"),
    Role("route", "query", ("question", "history"), ("route",), "route(question, history, trace) -> decision", True,
         "sends a question to the documents, a conversational answer or the web"),
    Role("follow_up", "query", ("question", "history"), ("query",), "rewrite(question, history, trace) -> query",
         False, "rewrites a follow-up and its conversation into a standalone query (questions with history)"),
    Role("profile", "query", ("query",), ("profile",), "profile(query, trace) -> profile or None", True,
         "profiles the query (intent, complexity) beside the documents (type, technical density, topics)"),
    Role("strategy", "query", ("query", "profile"), ("strategy",),
         "choose(query, trace[, profile=]) -> strategy or None", True,
         "chooses dense, bm25 or hybrid search for the query, over the same index"),
    Role("transform", "query", ("query",), ("nodes",), "a retriever built over the retriever (needs 'retriever')",
         False, "searches with rewrites of the query and fuses the results"),
    Role("gate", "retrieval", ("query", "nodes"), ("nodes", "quality"),
         "run(query, retrieve, trace, switch=, strategy=) -> nodes, then .outcome", True,
         "checks the results and retries with a reformulated query or another strategy"),
    Role("refine", "retrieval", ("query", "nodes", "history"), ("nodes",),
         "refine(query, nodes, retriever, trace, history=) -> nodes", False,
         "filters, re-ranks or asks for more results"),
    Role("context", "context", ("query", "nodes"), ("nodes",), "process(query, nodes, trace) -> nodes", False,
         "reorders, cuts or extends the chunks the generator reads"),
    Role("generate", "answer", ("question", "history", "nodes", "quality"), ("answer",),
         "generate(question, nodes, trace, history=[, retrieval_quality=]) -> answer", True, "writes the answer"),
    Role("verify", "answer", ("question", "answer", "nodes"), ("groundedness", "answer", "nodes"),
         "judge(question, answer, contexts, trace) -> (score, judgement)", True,
         "checks the answer against its context and corrects it"),
    Role("check", "answer", ("question", "answer", "nodes"), ("answer_check", "answer", "nodes"),
         "check(question, answer, contexts, trace) -> scores", True,
         "grades the final answer (and may retry it: a new answer, from new chunks)"),
)
ROLE_NAMES = tuple(role.name for role in ROLES)
GROUP_TITLES = {"chunking": "Chunking", "query": "Query: routing and rewriting",
                "retrieval": "Retrieval and its judges", "context": "Context: reranking, enrichment and compression",
                "answer": "Answer: generation and its checks"}
_BY_NAME = {role.name: role for role in ROLES}


def role_of(cls: type[Judge] | Any, where: str = "judges") -> Role:
    """The role ``cls`` declares, its inputs and outputs checked against it; a one-line
    ConfigError otherwise (``cls`` may be a stage class or instance)."""
    name, declared = getattr(cls, "name", "") or type(cls).__name__, getattr(cls, "role", "")
    role = _BY_NAME.get(declared)
    if role is None:
        said = f"declares role '{clipped(str(declared))}'" if declared else "declares no role"
        raise ConfigError(f"{where}: '{name}' {said}, so the pipeline has no place to run it. "
                          f"Valid roles: {', '.join(ROLE_NAMES)}")
    for kind, declared_fields, allowed in (("reads", getattr(cls, "inputs", ()), role.reads),
                                           ("returns", getattr(cls, "outputs", ()), role.writes)):
        extra = [item for item in declared_fields if item not in allowed]
        if extra:
            raise ConfigError(f"{where}: '{name}' {kind} {', '.join(map(str, extra))}, which role '{role.name}' "
                              f"does not have. Role '{role.name}' {kind}: {', '.join(allowed)}")
    return role


def position(cls: type[Judge] | Any) -> tuple[int, int, str]:
    """Where a stage runs: its role's place in ``ROLES``, its order within the role, its name."""
    return ROLE_NAMES.index(role_of(cls).name), getattr(cls, "order", 100), getattr(cls, "name", "")


def in_pipeline_order(stages: Iterable[Any]) -> list[Any]:
    """Stage classes or instances sorted as the pipeline runs them; each role is checked."""
    return sorted(stages, key=position)


def check_single_roles(stages: Sequence[type[Judge] | Any], where: str = "judges") -> None:
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
