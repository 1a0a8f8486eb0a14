"""Query transforms: multi-query and HyDE, each a retriever wrapping a base retriever.

Multi-query asks the LLM for rewrites of the question, retrieves each through the base
retriever and fuses the rankings with reciprocal rank fusion (RRF, k=60 by default). HyDE asks
the LLM for a passage that would answer the question and retrieves with that passage, alone or
together with the question. Off, or on a reply that cannot be used, both retrieve with the
question alone: exactly the base retriever.

LanceDB's RRFReranker fuses a vector and a full-text result table of one query; here the
inputs are several lists of LlamaIndex nodes, so a small RRF function does it.

Multi-query's ``strategy_in_prompt`` names the retrieval strategy chosen for the question (by the
strategy judge, or the quality gate switching) in its prompt, so the rewrites suit an exact-word or
a meaning-based search; a gate retry with another strategy then asks again and fuses new
expansions for it (without the option the same prompt returns the cached rewrites). With
``expand_before_strategy`` the first expansions leave the strategy out (the agentic design expands
before it chooses: its expansions do not depend on the choice, so making them in the retrieval
step gives the same queries), and only a switch after the question's first search names it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.retrievers.switchable import SwitchableRetriever
from ragkit.stages.base import Judgement, JudgementLog, Stage, StageParams
from ragkit.stages.query.params import (
    VARIANT_TYPES,
    HyDEParams,
    HyDERetrieverInfo,
    MultiQueryParams,
    MultiQueryRetrieverInfo,
    TransformInfo,
)


def rrf_fuse(rankings: list[list[NodeWithScore]], k: int = 60) -> list[NodeWithScore]:
    """Nodes of all rankings by the sum of 1 / (k + rank) (rank from 1), best first; ties keep first-seen order."""
    fused: dict[str, float] = {}
    nodes: dict[str, NodeWithScore] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, node in enumerate(ranking, start=1):
            node_id = node.node.node_id
            if node_id in seen:  # a ranking votes once per node
                continue
            seen.add(node_id)
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (k + rank)
            nodes.setdefault(node_id, node)
    order = sorted(fused, key=lambda node_id: -fused[node_id])
    return [NodeWithScore(node=nodes[node_id].node, score=fused[node_id]) for node_id in order]


class _TransformRetriever(TransformInfo, Stage, BaseRetriever):
    """A judge that is also a LlamaIndex retriever over ``retriever``; decisions go to ``trace``.
    Every transform rewrites the query and retrieves with the rewrites, so its place is declared here."""

    def __init__(self, params: StageParams, llm: Any = None, *, retriever: BaseRetriever | None = None,
                 trace: JudgementLog | None = None, **_dependencies: Any) -> None:
        Stage.__init__(self, params, llm)
        BaseRetriever.__init__(self)
        if retriever is None:
            raise ValueError(f"judge '{self.name}' needs a base retriever (retriever=...)")
        self.retriever = retriever
        self.trace = trace if trace is not None else JudgementLog()

    def use_trace(self, trace: JudgementLog) -> None:
        """Record the next decisions into ``trace`` (one per question)."""
        self.trace = trace

    def _base(self, query: str) -> list[NodeWithScore]:
        return self.retriever.retrieve(query)


class MultiQueryReply(BaseModel):
    queries: list[str] = Field(description="Search queries that ask the same thing in other words.")


MULTI_QUERY_SYSTEM = "You rewrite a question as search queries. Reply with one JSON object only."


class TypedQueries(BaseModel):
    technical: str = Field(description="The question in the field's technical terms.")
    simple: str = Field(description="The question in plain everyday words.")
    aspect: str = Field(description="A query about the question's most specific aspect.")


# What each strategy rewards, for a prompt that names the strategy in use (``strategy_in_prompt``).
STRATEGY_HINTS = {
    "dense": "a meaning-based search: write natural phrases that say what the answer is about",
    "bm25": "an exact-word search: use the precise terms, names and codes a matching text would contain",
    "hybrid": "a search by meaning and exact words: combine natural phrasing with the key terms",
}


def strategy_line(strategy: str | None) -> str:
    """The prompt line naming the strategy in use; empty when none was chosen (the prompt has no such line)."""
    if strategy is None:
        return ""
    return f"The queries are searched with {strategy}, {STRATEGY_HINTS.get(strategy, 'the strategy in use')}.\n"


def switchable_under(retriever: Any) -> SwitchableRetriever | None:
    """The ``SwitchableRetriever`` under ``retriever`` (through inner transforms), or None."""
    seen: set[int] = set()
    while retriever is not None and id(retriever) not in seen:
        seen.add(id(retriever))
        if isinstance(retriever, SwitchableRetriever):
            return retriever
        retriever = getattr(retriever, "retriever", None)
    return None


def chosen_strategy(retriever: Any, after_switch_only: bool = False) -> str | None:
    """The strategy chosen for this question by the strategy judge or the gate, found on the
    ``SwitchableRetriever`` under ``retriever``; None when none was (or, ``after_switch_only``,
    while the strategy has not changed since the question's first search)."""
    switchable = switchable_under(retriever)
    if switchable is None or (after_switch_only and not switchable.switched):
        return None
    return switchable.chosen


def typed_query_prompt(query: str, strategy: str | None = None) -> str:
    return (
        "Example:\n"
        "Question: Why do cats purr?\n"
        '{"technical": "feline purring mechanism laryngeal muscles", "simple": "why does my cat purr", '
        '"aspect": "purring when cats are injured"}\n\n'
        f"Question: {query}\n{strategy_line(strategy)}"
        "Write three search queries: technical (expert terms), simple (plain words) and aspect (one specific "
        "aspect). Reply as JSON with technical, simple and aspect."
    )


def multi_query_prompt(query: str, count: int, strategy: str | None = None) -> str:
    return (
        "Example:\n"
        "Question: Why do cats purr?\n"
        '{"queries": ["reasons cats purr", "what makes a cat purr", "cat purring causes"]}\n\n'
        f"Question: {query}\n{strategy_line(strategy)}"
        f"Write {count} different search queries for this question. Reply as JSON with queries."
    )


@dataclass
class Expansion:
    """A question's expansions: the queries to search (None: the reply was unusable, the question
    alone is searched) and the judgement that records them (its ``kept`` filled by the search)."""

    query: str
    queries: list[str] | None
    judgement: Judgement
    started: float


class MultiQueryRetriever(MultiQueryRetrieverInfo, _TransformRetriever):
    params: MultiQueryParams
    _prepared: Expansion | None = None

    def use_trace(self, trace: JudgementLog) -> None:
        """Record the next decisions into ``trace`` (one per question); expansions prepared for an
        earlier question are dropped."""
        super().use_trace(trace)
        self._prepared = None

    @property
    def expands_before_strategy(self) -> bool:
        """On with ``expand_before_strategy``: the pipeline calls ``expand_first`` before the strategy judge."""
        return self.enabled and self.params.expand_before_strategy

    def expand_first(self, query: str) -> None:
        """The question's first expansions, made (and recorded) now, before the strategy is chosen
        (the agentic design's order); the first search of ``query`` fuses them without another call,
        unless the strategy switched since (then the expansions are made again, naming it)."""
        if self.expands_before_strategy:
            self._prepared = self._expand(query, None)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if not self.enabled:
            return self._base(query)
        prepared, self._prepared = self._prepared, None
        # Named in the prompt only when chosen: the strategy-free prompt (and its cached reply) stays.
        strategy = chosen_strategy(self.retriever, self.params.expand_before_strategy) \
            if self.params.strategy_in_prompt else None
        expansion = prepared if prepared is not None and prepared.query == query and strategy is None \
            else self._expand(query, strategy)
        if expansion.queries is None:
            return self._base(query)
        fused = rrf_fuse([self._base(text) for text in expansion.queries], self.params.rrf_k)[: self.params.top_k]
        expansion.judgement.decision["kept"] = [n.node.node_id for n in fused]
        if expansion is not prepared:  # expanded and searched in one step: the judgement times both
            expansion.judgement.seconds = time.perf_counter() - expansion.started
        return fused

    def _expand(self, query: str, strategy: str | None) -> Expansion:
        """Ask for the expansions of ``query`` (``strategy`` named in the prompt when given) and
        record the judgement; its ``kept`` is filled when they are searched."""
        started = time.perf_counter()
        noted: dict[str, Any] = {} if strategy is None else {"strategy": strategy}
        if self.params.expand_before_strategy:
            noted["expanded"] = "for the strategy switched to" if strategy else "before the strategy"
        if self.params.style == "typed":
            return self._typed(query, started, strategy, noted)
        try:
            result = self.ask(multi_query_prompt(query, self.params.num_queries, strategy), MultiQueryReply,
                              system=MULTI_QUERY_SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            return Expansion(query, None, self.trace.add(self.fallback(query, {**noted}, None, started, str(error))),
                             started)
        if result.parsed is None:
            return Expansion(query, None, self.trace.add(self.fallback(query, {**noted}, result, started, None)),
                             started)

        variants, dropped = self._variants(query, result.parsed.queries)
        if not variants:
            return Expansion(query, None, self.trace.add(self.fallback(
                query, {**noted, "dropped_queries": dropped}, result, started, "no usable query in the reply")),
                started)
        queries = ([query] if self.params.include_original else []) + variants
        decision = {**noted, "queries": queries, "dropped_queries": dropped}
        return Expansion(query, queries, self.trace.add(self.judgement(query, decision, result, started=started)),
                         started)

    def _typed(self, query: str, started: float, strategy: str | None, noted: dict[str, Any]) -> Expansion:
        """Three typed variants (technical, simple, aspect) to fuse with the question by RRF."""
        try:
            result = self.ask(typed_query_prompt(query, strategy), TypedQueries, system=MULTI_QUERY_SYSTEM,
                              max_tokens=self.params.max_tokens)
        except LLMError as error:
            return Expansion(query, None, self.trace.add(self.fallback(
                query, {"style": "typed", **noted}, None, started, str(error))), started)
        if result.parsed is None:
            return Expansion(query, None, self.trace.add(self.fallback(
                query, {"style": "typed", **noted}, result, started, None)), started)
        typed = {kind: " ".join(getattr(result.parsed, kind).split()) for kind in VARIANT_TYPES}
        seen = {" ".join(query.lower().split())}
        kept: dict[str, str] = {}
        for kind, text in typed.items():
            if text and text.lower() not in seen:
                seen.add(text.lower())
                kept[kind] = text
        if not kept:
            return Expansion(query, None, self.trace.add(self.fallback(
                query, {"style": "typed", **noted, "variants": typed}, result, started,
                "no usable variant in the reply")), started)
        queries = ([query] if self.params.include_original else []) + list(kept.values())
        decision = {"style": "typed", **noted, "variants": kept, "dropped": sorted(set(typed) - set(kept)),
                    "queries": queries}
        return Expansion(query, queries, self.trace.add(self.judgement(query, decision, result, started=started)),
                         started)

    def _variants(self, query: str, proposed: list[str]) -> tuple[list[str], list[str]]:
        """Distinct non-empty rewrites other than the question, at most ``num_queries``; and the rest."""
        seen = {" ".join(query.lower().split())}
        kept: list[str] = []
        dropped: list[str] = []
        for text in proposed:
            normal = " ".join(text.lower().split())
            if normal and normal not in seen and len(kept) < self.params.num_queries:
                seen.add(normal)
                kept.append(" ".join(text.split()))
            else:
                dropped.append(text)
        return kept, dropped


class HyDEReply(BaseModel):
    passage: str = Field(description="A short passage that answers the question.")


HYDE_SYSTEM = "You write a short passage that answers a question. Reply with one JSON object only."


def hyde_prompt(query: str) -> str:
    return (
        "Example:\n"
        "Question: Why do cats purr?\n"
        '{"passage": "Cats purr when they are content, and also to calm themselves when hurt."}\n\n'
        f"Question: {query}\n"
        "Write a short passage that answers the question. Reply as JSON with passage."
    )


class HyDERetriever(HyDERetrieverInfo, _TransformRetriever):
    params: HyDEParams

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if not self.enabled:
            return self._base(query)
        started = time.perf_counter()
        try:
            result = self.ask(hyde_prompt(query), HyDEReply, system=HYDE_SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as call_error:
            self.trace.add(self.fallback(query, {}, None, started, str(call_error)))
            return self._base(query)
        passage = " ".join(result.parsed.passage.split())[: self.params.passage_chars].strip() if result.parsed else ""
        if not passage:
            error = None if result.parsed is None else "empty passage"
            self.trace.add(self.fallback(query, {}, result, started, error))
            return self._base(query)

        if self.params.combine == "passage":
            nodes = self._base(passage)
        elif self.params.combine == "concatenate":
            nodes = self._base(f"{query}\n{passage}")
        else:
            nodes = rrf_fuse([self._base(query), self._base(passage)], self.params.rrf_k)
        nodes = nodes[: self.params.top_k]
        decision = {"passage": passage, "combine": self.params.combine, "kept": [n.node.node_id for n in nodes]}
        self.trace.add(self.judgement(query, decision, result, started=started))
        return nodes
