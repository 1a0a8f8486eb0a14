"""One configuration answering one question: routing, retrieval, the judges, generation, a Trace.

The stages are wired by the role each declares (``ragkit.stages.roles``), in role order (the one
description of the steps; the docs and other modules refer here):

1. route (the router: documents, a conversational answer, or the web);
2. follow_up (condense: a follow-up with its conversation becomes a standalone query);
3. profile (the query's intent and complexity beside the documents' profile) -> expand (a
   multi-query transform with ``expand_before_strategy`` makes the question's first expansions
   here, a step of its own, as the agentic design expands before it chooses) -> strategy (dense,
   bm25 or hybrid for this query, over the same index; a strategy stage that reads ``profile``
   is given it);
4. transform (multi-query or HyDE, as retrievers over the base retriever, built by
   ``ragkit.stages.wiring``) inside the gate (the quality gate: retry with a reformulated query,
   or switch strategy; web fallback when it fails). A gate with ``position: after_rerank`` has
   each attempt reranked (the context stages that declare ``reranks``) before it judges it; those
   rerankers then do not run again in step 5;
5. refine (the Retrieval Judge: filter, re-rank, ask for more) -> context (the rerank judge, then
   context enrichment: neighbouring and same-section chunks, then contextual compression: the
   sentences bearing on the question);
6. generate -> verify (groundedness, with hallucination correction on a failed check) -> check
   (the answer check; with ``retry``, the late tier: a second gate that re-retrieves or
   regenerates a failed answer by its issue).

A role takes any stage that declares it, a plugin's as well as a built-in; several stages in one
role run by their ``order``. A stage that is off is simply absent, so a pipeline without judges
is exactly plain retrieval, and a question without conversation history skips the follow_up
role.

Each step is timed, and the LLM usage of the calls made during the step is attached to it, so
the ``stages`` table shows per question what every judge cost in seconds, calls and tokens. A
step that runs again (a correction round) is a row of its own.

This module routes a question and finds its context; the pipeline holds a step recorder
(``ragkit.pipeline.steps.StepRecorder``) and an answer checker (``ragkit.pipeline.answer_checks``:
groundedness, correction, the answer check and its late tier). What one question produced is a
``ragkit.pipeline.trace.Trace``; what its steps share, a ``ragkit.stages.question.QuestionContext``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

from ragkit.errors import WebSearchError
from ragkit.llms.calls import LLMClient
from ragkit.pipeline.answer_checks import AnswerChecker, quality_for
from ragkit.pipeline.steps import StepRecorder, stage_row
from ragkit.pipeline.trace import Trace
from ragkit.stages.answer.generator import STAGE as GENERATE_STAGE
from ragkit.stages.base import Judgement, JudgementLog
from ragkit.stages.question import QuestionContext
from ragkit.stages.roles import by_role, reads_of
from ragkit.web import WebProvider, web_nodes

if TYPE_CHECKING:  # the pipeline calls these through their methods only
    from ragkit.retrievers.cache import RetrievalCache
    from ragkit.retrievers.switchable import SwitchableRetriever
    from ragkit.stages.roles import (
        ContextRole,
        FollowUpRole,
        GateRole,
        GenerateRole,
        ProfileRole,
        RefineRole,
        RouteRole,
        StrategyRole,
    )

__all__ = ["NOT_PER_QUESTION", "NO_WEB_PROVIDER", "Pipeline", "stage_row"]

NO_WEB_PROVIDER = "no web search provider is configured (set `web:` in the experiment; none ships offline)"


# Roles whose stages run outside ``Pipeline.answer``: the chunk step, and the transforms that
# ``ragkit.stages.wiring`` builds into ``retriever``.
NOT_PER_QUESTION = ("chunking", "transform")


@dataclass
class Pipeline:
    """``retriever`` may already be a query-transform stage wrapping the base retriever, which
    may be a ``SwitchableRetriever`` (``switchable``) when the strategy can change per query.
    ``stages``: the other stages that are on, in any order; each runs in its declared role."""

    retriever: BaseRetriever
    base_retriever: BaseRetriever
    retrieve_stage: str = "retrieve"
    stages: Sequence[Any] = ()
    switchable: SwitchableRetriever | None = None
    web: WebProvider | None = None
    web_results: int = 10
    # The retrievers that search the index (the base one, or each a switchable one holds): they
    # take the question's scope and report the time their cached searches replayed.
    searchers: tuple[Any, ...] = ()
    retrieval_cache: RetrievalCache | None = None
    clients: tuple[LLMClient, ...] = ()
    clock: Callable[[], float] = time.perf_counter

    def __post_init__(self) -> None:
        self.roles = by_role(list(self.stages))
        misplaced = [stage.name for role in NOT_PER_QUESTION for stage in self.roles[role]]
        if misplaced:
            raise ValueError(f"pipeline: {', '.join(misplaced)} do not run per question (chunking runs in the chunk "
                             "step; a transform is built into the retriever by ragkit.stages.wiring)")
        self.steps = StepRecorder(self.clients, self.searchers, self.clock)
        self.checks = AnswerChecker(self.steps, verify=self._one("verify"), check=self._one("check"),
                                    search_once=self._search_once, search_again=self._search_again,
                                    switchable=self.switchable)

    def _one(self, role: str) -> Any | None:
        """The stage of a role that takes one (``roles.Role.single``), or None."""
        stages = self.roles[role]
        return stages[0] if stages else None

    def answer(self, question: str, history: Sequence[Any] = (), scope: Sequence[str] | None = None,
               documents: Sequence[str] | None = None) -> Trace:
        """``history``: the conversation before this question (``ragkit.questions.Turn`` items);
        ``scope``: the question's documents, which a retriever with ``scope: question_doc``
        limits its searches to; ``documents``: the ones the user chose, for ``scope: named_doc``
        (other retrievers ignore both).

        Any LlamaIndex retriever makes a pipeline; without stages it is plain retrieval, and
        ``ragkit.pipeline.export.build_pipeline`` builds a configured run's::

            >>> pipeline = Pipeline(retriever, retriever)
            >>> trace = pipeline.answer("what animal purrs")
            >>> [node.node.metadata["doc_id"] for node in trace.nodes], [row["stage"] for row in trace.stages]
            (['d1', ...], ['retrieve'])
        """
        try:
            trace = self._answer(question, history, scope, documents)
            self._record_cache_lookups(trace)
            return trace
        finally:
            if self.retrieval_cache is not None:
                self.retrieval_cache.flush()  # after the question, so no step times the writes
            for searcher in self.searchers:
                if hasattr(searcher, "flush_semantic_cache"):
                    searcher.flush_semantic_cache()

    def _record_cache_lookups(self, trace: Trace) -> None:
        """Each semantic-cache lookup of the question as a judgement (hit or miss, the similarity,
        the cached query), after the question's own: the lookups happened inside its searches."""
        for searcher in self.searchers:
            for lookup in searcher.drain_cache_lookups():
                trace.cache_lookups.append(lookup)
                trace.judgements.append(Judgement("semantic_cache", lookup.query[:500], lookup.as_decision(),
                                                  seconds=lookup.seconds))

    def _answer(self, question: str, history: Sequence[Any], scope: Sequence[str] | None,
                documents: Sequence[str] | None) -> Trace:
        trace = Trace(question=question)
        context = QuestionContext(question, question, history, JudgementLog(trace.judgements))
        log = context.log
        self.steps.forget()  # usage left over from an earlier question belongs to no step here
        for searcher in self.searchers:
            searcher.drain_cache_lookups()  # left by a question that failed: they belong to no question
            searcher.set_scope(list(scope) if scope is not None else None,
                               list(documents) if documents is not None else None)
        if missing := sorted({searcher.params.scope for searcher in self.searchers if searcher.scope_missing}):
            log.add(Judgement("scope", question[:500], {
                "action": "searched every document",
                "reason": f"scope is {' and '.join(missing)} but the question names no document"}))
        if hasattr(self.retriever, "use_trace"):
            self.retriever.use_trace(log)
        if self.switchable is not None:
            self.switchable.reset()

        router: RouteRole | None = self._one("route")
        if router is not None:
            # Only a router that declares it reads the named documents is given them (a plugin's
            # ``route(question, history, trace)`` keeps working).
            declared = getattr(router, "inputs", None) or ()
            named = {"documents": list(documents)} if documents and "documents" in declared else {}
            decision = self.steps.run(trace, f"judge:{router.name}",
                                      lambda: router.route(question, history, log, **named))
            trace.route = decision.route
            if decision.route == "conversational":
                generator: GenerateRole | None = self._one("generate")
                if generator is not None:
                    trace.answer = self.steps.run(trace, GENERATE_STAGE,
                                                  lambda: generator.converse(question, history, log))
                self.checks.check_answer(trace, context)
                return trace
            if decision.route == "web":
                trace.nodes = self._search_web(trace, question, log, because="the router chose the web")
                self._generate_and_check(trace, context, retrieval_quality=None, can_re_retrieve=False)
                return trace

        query = question
        follow_ups: list[FollowUpRole] = self.roles["follow_up"] if history else []
        for follow_up in follow_ups:
            query = self.steps.run(trace, f"judge:{follow_up.name}", partial(follow_up.rewrite, query, history, log))
        trace.query = query
        context = replace(context, query=query)
        profile = None
        profiler: ProfileRole | None = self._one("profile")
        if profiler is not None:
            profile = self.steps.run(trace, f"judge:{profiler.name}", lambda: profiler.profile(query, log))
        if (expander := self._expander()) is not None:
            # The design's order: the query is expanded before the strategy is chosen.
            self.steps.run(trace, f"judge:{expander.name}", lambda: expander.expand_first(query))
        strategy: StrategyRole | None = self._one("strategy")
        if strategy is not None and (switchable := self.switchable) is not None:
            # Only a strategy stage that reads the profile (``roles.reads_of``) is given one, and
            # only when there is one.
            read = {"profile": profile} if profile is not None and "profile" in reads_of(strategy) else {}
            chosen = self.steps.run(trace, f"judge:{strategy.name}", lambda: strategy.choose(query, log, **read))
            if chosen is not None:
                switchable.use(chosen)

        nodes = self._retrieve(trace, query, log)
        retrieval_quality = None
        reranked = self._reranks_before_gate()  # already applied to the gate's attempts
        gate: GateRole | None = self._one("gate")
        if gate is not None:
            retrieval_quality = gate.outcome.quality
            if gate.outcome.passed is False and gate.params.web_fallback:
                found = self._search_web(trace, query, log, because="the quality gate failed")
                if found:  # web results are not reranked yet
                    nodes, reranked = found, []
                # no provider or no result: the best document attempt stays
        refiners: list[RefineRole] = self.roles["refine"]
        for refine in refiners:
            nodes = self.steps.run(trace, f"judge:{refine.name}",
                                   partial(refine.refine, query, nodes, self.base_retriever, log, history=history))
        nodes = self._context(trace, query, nodes, log, skip=reranked)
        trace.nodes = list(nodes)
        self._generate_and_check(trace, context, retrieval_quality, can_re_retrieve=True)
        return trace

    def _expander(self) -> Any | None:
        """The transform around the retriever that expands the query before the strategy is chosen
        (multi-query's ``expand_before_strategy``), or None."""
        seen: set[int] = set()
        retriever: Any = self.retriever
        while retriever is not None and id(retriever) not in seen:
            seen.add(id(retriever))
            if getattr(retriever, "expands_before_strategy", False):
                return retriever
            retriever = getattr(retriever, "retriever", None)
        return None

    def _reranks_before_gate(self) -> list[Any]:
        """The context stages that rerank (``reranks``), when the gate sits after them
        (``position: after_rerank``): they rerank each attempt the gate judges."""
        gate = self._one("gate")
        if gate is None or getattr(gate.params, "position", "before_rerank") != "after_rerank":
            return []
        return [stage for stage in self.roles["context"] if getattr(stage, "reranks", False)]

    def _retrieve(self, trace: Trace, query: str, log: JudgementLog) -> list[NodeWithScore]:
        # Each optional step is bound to a local name: the lambdas then see it as not None.
        gate: GateRole | None = self._one("gate")
        if gate is not None:
            switchable = self.switchable
            # The strategy in use (the run's retriever or the strategy judge's choice) is where the
            # gate starts: a diagnosis mapped to it is a retry, not a switch repeating the search.
            before = switchable.current if switchable is not None else None
            retrieve: Callable[[str], list[NodeWithScore]] = self.retriever.retrieve
            extra: dict[str, Any] = {}
            if getattr(gate.params, "position", "before_rerank") == "after_rerank":
                reranks = self._reranks_before_gate()
                extra["reranked_by"] = [stage.name for stage in reranks]

                def retrieve(attempt_query: str) -> list[NodeWithScore]:
                    # Reranked for the question, as after the gate, whatever query found the chunks.
                    return self._context(trace, query, self.retriever.retrieve(attempt_query), log,
                                         only=reranks)

            nodes = self.steps.run(trace, f"judge:{gate.name}", lambda: gate.run(
                query, retrieve, log, switch=switchable.use if switchable is not None else None,
                strategy=before, **extra))
            if switchable is not None and before is not None:
                # Later searches (a correction's re-retrieval) use the kept attempt's strategy,
                # not the last one the gate tried.
                switchable.use(gate.outcome.strategy or before)
            return nodes
        return self.steps.run(trace, self.retrieve_stage, lambda: self.retriever.retrieve(query))

    def _search_once(self, trace: Trace, query: str, log: JudgementLog, stage: str) -> list[NodeWithScore]:
        """One search timed as ``stage``, then the context stages, for a correction or a retry."""
        return self._context(trace, query, self.steps.run(trace, stage, lambda: self.retriever.retrieve(query)), log)

    def _search_again(self, trace: Trace, query: str, log: JudgementLog) -> tuple[list[NodeWithScore], float | None]:
        """The retrieval path once more, for a late retry: query expansion (the transforms in
        ``retriever``) inside the quality gate with its attempts, then the context stages; and the
        gate's quality of the kept attempt (None without a gate)."""
        nodes = self._retrieve(trace, query, log)
        gate = self._one("gate")
        quality = gate.outcome.quality if gate is not None else None
        return self._context(trace, query, nodes, log, skip=self._reranks_before_gate()), quality

    def _context(self, trace: Trace, query: str, nodes: list[NodeWithScore], log: JudgementLog,
                 skip: Sequence[Any] = (), only: Sequence[Any] | None = None) -> list[NodeWithScore]:
        """The context role's stages in order (rerank, then enrichment), each a step of its own;
        ``only`` these, and never those in ``skip`` (the reranks a gate after rerank applied)."""
        stages: list[ContextRole] = self.roles["context"]
        for stage in stages:
            if any(stage is done for done in skip) or (only is not None and not any(stage is s for s in only)):
                continue
            nodes = self.steps.run(trace, f"judge:{stage.name}", partial(stage.process, query, nodes, log))
        return nodes

    def _search_web(self, trace: Trace, query: str, log: JudgementLog, because: str) -> list[NodeWithScore]:
        """Web results as nodes; none, recorded, when no provider is configured or it fails: a
        web answer is never made up."""
        started = time.perf_counter()
        decision: dict[str, Any] = {"query": query, "because": because}
        if (web := self.web) is None:
            log.add(Judgement("web", query[:500], {**decision, "action": "not searched", "reason": NO_WEB_PROVIDER},
                                 seconds=time.perf_counter() - started))
            return []
        try:
            results = self.steps.run(trace, "web:search", lambda: web.search(query, self.web_results))
        except WebSearchError as error:
            log.add(Judgement("web", query[:500], {**decision, "action": "failed"}, valid=False, error=str(error),
                                 fell_back=True, seconds=time.perf_counter() - started))
            return []
        nodes = web_nodes(results)[: self.web_results]
        log.add(Judgement("web", query[:500], {**decision, "action": "searched", "provider": web.name,
                                                  "results": [node.node.metadata.get("url") for node in nodes]},
                             seconds=time.perf_counter() - started))
        return nodes

    def _generate_and_check(self, trace: Trace, context: QuestionContext, retrieval_quality: float | None,
                            can_re_retrieve: bool) -> None:
        generator: GenerateRole | None = self._one("generate")
        if generator is None:
            return
        nodes, log = trace.nodes, context.log
        if not nodes and trace.route == "web":
            reason = "the web route found nothing" if self.web is not None else NO_WEB_PROVIDER
            trace.answer = self.steps.run(trace, GENERATE_STAGE,
                                          lambda: generator.abstain(context.question, reason, log))
        else:
            trace.answer = self.steps.run(trace, GENERATE_STAGE, lambda: generator.generate(
                context.question, nodes, log, history=context.history, **quality_for(generator, retrieval_quality)))
        self.checks.after_generation(trace, context, generator, retrieval_quality, can_re_retrieve)
