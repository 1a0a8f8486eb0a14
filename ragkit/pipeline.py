"""One configuration answering one question: retrieval, the judges, generation, a Trace.

The order follows the architecture: query transform (multi-query or HyDE, as a retriever over
the base retriever) -> quality gate (retry with a reformulated query) -> Retrieval Judge
(filter, re-rank, ask for more) -> rerank judge -> generator -> groundedness judge. A judge
that is off is simply absent, so a pipeline without judges is exactly plain retrieval.

Each step is timed, and the LLM usage of the calls made during the step is attached to it, so
the ``stages`` table shows per question what every judge cost in seconds, calls and tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from ragkit.judges.base import Judgement, JudgeTrace
from ragkit.judges.generator import Answer, Generator
from ragkit.judges.groundedness import GroundednessJudge
from ragkit.judges.quality_gate import QualityGate
from ragkit.judges.rerank import RerankJudge
from ragkit.judges.retrieval import RetrievalJudge
from ragkit.llms.calls import LLMClient, StageUsage
from ragkit.results import USAGE_FIELDS


@dataclass
class Trace:
    """Everything one question produced: final chunks, answer, judge decisions, stage costs."""

    question: str
    nodes: list[NodeWithScore] = field(default_factory=list)
    answer: Answer | None = None
    judgements: list[Judgement] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    groundedness: float | None = None
    groundedness_error: str | None = None


def stage_row(stage: str, seconds: float, usage: Iterable[StageUsage]) -> dict[str, Any]:
    """A ``stages`` row: the step's seconds plus the LLM usage of its calls (zeros without).

    Like a reused index, which reports the time it took to build, a reply read from the cache
    counts the time it took to generate: seconds is what the step costs this configuration, and
    backend_calls what this run actually sent."""
    usage = list(usage)
    row: dict[str, Any] = {"stage": stage, "seconds": seconds + sum(item.replayed_seconds for item in usage)}
    for name in USAGE_FIELDS:
        row[name] = sum(getattr(item, name) for item in usage)
    # A step is cached when it made LLM calls and all were answered from the cache.
    row["cached"] = bool(usage) and all(item.cache_hit for item in usage)
    return row


@dataclass
class Pipeline:
    """``retriever`` may already be a query-transform judge wrapping the base retriever."""

    retriever: BaseRetriever
    base_retriever: BaseRetriever
    retrieve_stage: str = "retrieve"
    quality_gate: QualityGate | None = None
    retrieval_judge: RetrievalJudge | None = None
    rerank: RerankJudge | None = None
    generator: Generator | None = None
    groundedness: GroundednessJudge | None = None
    clients: tuple[LLMClient, ...] = ()
    clock: Callable[[], float] = time.perf_counter

    def _drain(self) -> list[StageUsage]:
        return [usage for client in self.clients for usage in client.drain_usage()]

    def _step(self, trace: Trace, stage: str, work: Callable[[], Any]) -> Any:
        started = self.clock()
        result = work()
        trace.stages.append(stage_row(stage, self.clock() - started, self._drain()))
        return result

    def answer(self, question: str) -> Trace:
        trace = Trace(question=question)
        judged = JudgeTrace(trace.judgements)
        self._drain()  # usage left over from an earlier question belongs to no stage here
        for component in (self.retriever, self.rerank):
            if component is not None and hasattr(component, "use_trace"):
                component.use_trace(judged)

        # Each optional step is bound to a local name: the lambdas then see it as not None.
        if (gate := self.quality_gate) is not None:
            nodes = self._step(trace, "judge:quality_gate",
                               lambda: gate.run(question, self.retriever.retrieve, judged))
        else:
            nodes = self._step(trace, self.retrieve_stage, lambda: self.retriever.retrieve(question))
        if (retrieval_judge := self.retrieval_judge) is not None:
            nodes = self._step(trace, "judge:retrieval",
                               lambda: retrieval_judge.refine(question, nodes, self.base_retriever, judged))
        if (rerank := self.rerank) is not None:
            nodes = self._step(trace, "judge:rerank", lambda: rerank.postprocess_nodes(
                nodes, query_bundle=QueryBundle(query_str=question)))
        trace.nodes = list(nodes)

        if (generator := self.generator) is not None:
            trace.answer = self._step(trace, "generate", lambda: generator.generate(question, nodes, judged))
        if self.groundedness is not None and trace.answer is not None:
            self._check_groundedness(trace, self.groundedness, trace.answer, judged)
        return trace

    def _check_groundedness(self, trace: Trace, groundedness: GroundednessJudge, answer: Answer,
                            judged: JudgeTrace) -> None:
        if not answer.text:
            trace.groundedness_error = f"no answer to check: {answer.error or 'empty answer'}"
            return
        contexts = [node.node.get_content() for node in trace.nodes]
        score, judgement = self._step(trace, "judge:groundedness",
                                      lambda: groundedness.judge(trace.question, answer.text, contexts, judged))
        trace.groundedness = score
        if score is None and judgement is not None:
            trace.groundedness_error = judgement.decision.get("no_score_reason") or judgement.error
