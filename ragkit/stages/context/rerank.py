"""Rerank judge: score each chunk for the question and keep the best ``top_n``.

``llm`` mode scores a batch of chunks in one call (one reply holds a list of scores 0-100, one
per chunk, in the order shown), which costs one call per ``batch_size`` chunks instead of one
per chunk. ``cross_encoder`` mode scores with a sentence-transformers CrossEncoder from a local
folder (``model_path``; no weights ship offline, see ``ragkit.local_models``). ``heuristic`` mode
is BM25 over the candidates. A reply that cannot be used keeps the original nodes, untouched.

Two-stage rerank in one run: ``mode: llm`` with ``prefilter_n`` first keeps the best
``prefilter_n`` candidates by the cross-encoder (``prefilter: cross_encoder``, the default) or
by BM25 (``prefilter: bm25``, for machines without a model), then the LLM scores those and keeps
``top_n``. ``show_source`` puts each chunk's title and section (and its summary when the chunk
has one) in the LLM prompt; without it the prompt shows the chunk's text alone.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from functools import lru_cache
from typing import Annotated, Any, cast

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import BaseModel, Field, create_model

from ragkit.errors import LLMError
from ragkit.local_models import cross_encoder_scores
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.context.params import RerankJudgeInfo, RerankJudgeParams
from ragkit.stages.prompts import numbered_chunks, sourced_chunks
from ragkit.text import terms


class RerankReply(BaseModel):
    scores: list[int] = Field(description="Relevance 0-100 of each chunk, in the order shown.")


@lru_cache(maxsize=64)
def reply_model(count: int) -> type[RerankReply]:
    """The reply schema for a batch of ``count`` chunks: exactly ``count`` scores in 0-100.

    With a schema-constrained backend the grammar then forbids a list of the wrong length
    (a small model otherwise copies the example's two scores, or runs on).
    """
    scores = Annotated[list[Annotated[int, Field(ge=0, le=100)]], Field(min_length=count, max_length=count)]
    return create_model(f"RerankReply{count}", __base__=RerankReply,
                        scores=(scores, Field(description="Relevance 0-100 of each chunk, in the order shown.")))


SYSTEM = "You rate how well text chunks answer a question. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Question: Why do cats purr?\n"
    "[1] Stocks fell after the rate rise.\n"
    "[2] Cats purr when they are content.\n"
    '{"scores": [0, 90]}'
)


def build_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, show_source: bool = False) -> str:
    chunks = sourced_chunks(nodes, chunk_chars) if show_source else numbered_chunks(nodes, chunk_chars)
    return (
        f"{EXAMPLE}\n\n"
        f"Question: {query}\n{chunks}\n"
        f"Rate each of the {len(nodes)} chunks from 0 (useless) to 100 (answers it). "
        "Reply as JSON with scores: one number per chunk, in order."
    )


def bm25_scores(query: str, texts: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each text for the query, with document frequencies taken over ``texts``."""
    documents = [Counter(terms(text)) for text in texts]
    if not documents:
        return []
    lengths = [sum(document.values()) for document in documents]
    average = (sum(lengths) / len(lengths)) or 1.0
    query_terms = set(terms(query))
    frequency = {term: sum(term in document for document in documents) for term in query_terms}
    count = len(documents)
    scores = []
    for document, length in zip(documents, lengths):
        score = 0.0
        for term in query_terms:
            tf = document.get(term, 0)
            if tf:
                idf = math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        scores.append(score)
    return scores


class RerankJudge(RerankJudgeInfo, Stage, BaseNodePostprocessor):
    """A LlamaIndex node postprocessor; every decision goes to ``trace`` (one per batch)."""

    params: Any = None
    llm: Any = None
    trace: Any = None

    def __init__(self, params: RerankJudgeParams, llm: Any = None, trace: JudgementLog | None = None,
                 **_dependencies: Any) -> None:
        BaseNodePostprocessor.__init__(self)
        Stage.__init__(self, params, llm)
        self.trace = trace if trace is not None else JudgementLog()

    @classmethod
    def class_name(cls) -> str:
        return "RerankJudge"

    def use_trace(self, trace: JudgementLog) -> None:
        """Record the next decisions into ``trace`` (one per question)."""
        self.trace = trace

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        """The context role's call: rerank ``nodes`` for ``query``, decisions into ``trace``."""
        self.use_trace(trace)
        return self.postprocess_nodes(nodes, query_bundle=QueryBundle(query_str=query))

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if not self.enabled or not nodes:
            return list(nodes)
        if query_bundle is None:
            raise ValueError(f"judge '{self.name}' needs the query: pass query_str or query_bundle")
        query = query_bundle.query_str
        if self.params.mode == "heuristic":
            return self._scored(query, nodes, "bm25", self.params.top_n)
        if self.params.mode == "cross_encoder":
            return self._scored(query, nodes, "cross_encoder", self.params.top_n)
        if self.params.prefilter_n is not None and len(nodes) > self.params.prefilter_n:
            nodes = self._scored(query, nodes, self.params.prefilter, self.params.prefilter_n, stage="prefilter")
        return self._llm(query, nodes)

    def _scored(self, query: str, nodes: list[NodeWithScore], method: str, keep: int,
                stage: str | None = None) -> list[NodeWithScore]:
        """The best ``keep`` nodes by BM25 or the cross-encoder, recorded as one judgement."""
        started = time.perf_counter()
        texts = [node.node.get_content() for node in nodes]
        if method == "bm25":
            scores = bm25_scores(query, texts)
        else:
            scores = cross_encoder_scores(cast(str, self.params.model_path), query, texts)
        kept = self._keep_best(nodes, scores, keep)
        decision: dict[str, Any] = {"method": method, "scores": _by_id(nodes, scores), "kept": _ids(kept)}
        if stage is not None:
            decision["stage"] = stage
        self.trace.add(self.judgement(f"{query} | {len(nodes)} chunks", decision, started=started))
        return kept

    def _llm(self, query: str, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        size = self.params.batch_size
        scores: list[float] = []
        for first in range(0, len(nodes), size):
            batch = nodes[first : first + size]
            started = time.perf_counter()
            summary = f"{query} | chunks {first + 1}-{first + len(batch)} of {len(nodes)}"
            decision: dict[str, Any] = {"method": "llm", "shown": _ids(batch)}
            try:
                result = self.ask(build_prompt(query, batch, self.params.chunk_chars, self.params.show_source),
                                  reply_model(len(batch)),
                                  system=SYSTEM, max_tokens=self.params.max_tokens)
            except LLMError as error:
                self.trace.add(self.fallback(summary, decision, None, started, str(error)))
                return list(nodes)
            reply = result.parsed
            problem = None if reply is None else _score_problem(reply.scores, len(batch))
            if reply is None or problem:
                self.trace.add(self.fallback(summary, decision, result, started, problem))
                return list(nodes)
            scores += [float(score) for score in reply.scores]
            decision.update(scores=_by_id(batch, reply.scores))
            self.trace.add(self.judgement(summary, decision, result, started=started))
        kept = self._keep_best(nodes, scores, self.params.top_n)
        self.trace.judgements[-1].decision["kept"] = _ids(kept)
        return kept

    @staticmethod
    def _keep_best(nodes: list[NodeWithScore], scores: list[float], keep: int) -> list[NodeWithScore]:
        """Highest score first (ties keep retrieval order), the score replaced by the judge's."""
        order = sorted(range(len(nodes)), key=lambda index: -scores[index])
        return [NodeWithScore(node=nodes[index].node, score=scores[index]) for index in order[:keep]]


def _score_problem(scores: list[int], count: int) -> str | None:
    """Why a list of scores cannot rank ``count`` chunks, or None if it can."""
    if len(scores) != count:
        return f"expected {count} scores, got {len(scores)}: {scores}"
    outside = [score for score in scores if not 0 <= score <= 100]
    return f"scores outside 0-100: {outside}" if outside else None


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


def _by_id(nodes: list[NodeWithScore], scores: list[Any]) -> dict[str, float]:
    return {node.node.node_id: float(score) for node, score in zip(nodes, scores)}
