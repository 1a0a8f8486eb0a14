"""Retrieval Judge: the LLM keeps, orders and, when the chunks fall short, asks for more.

The model sees the question and the retrieved chunks numbered [1], [2], ... (short numbers, not
chunk ids, which a small model garbles). It replies which chunks are relevant, in which order,
and whether to search again with a refined query. Asking for more re-retrieves through the
given retriever and merges the new chunks (one copy per chunk id, its best score), up to
``max_iterations`` rounds. A reply that cannot be used falls back to the unjudged retrieval.

With ``none_relevant: keep_all`` a final reply that names no chunk relevant keeps every chunk (the
Retrieval Judge design's rule) instead of leaving the context empty. With ``show_file_name`` each
preview follows its source file name.

With ``loop: evaluate_refine`` the judge runs the design's phase 4 loop instead (an evaluation call,
then a separate refine call and a new search, ``ragkit.stages.retrieval.refine_loop``).

With ``min_relevance`` set the model also rates each chunk shown 0-1, and a chunk it calls
relevant is kept only when its rating reaches the threshold (a relevance filter); without it the
prompt asks for no rating and the reply carries none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated, Any, cast

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, Field, create_model

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.prompts import ConversationTurn, conversation_block, numbered_chunks, source_label
from ragkit.stages.retrieval.params import RetrievalJudgeInfo, RetrievalJudgeParams
from ragkit.stages.retrieval.refine_loop import evaluate_refine


class RetrievalReply(BaseModel):
    refined_query: str = Field(description="A better search query, used if request_more is true.")
    relevant: list[int] = Field(description="Numbers of the chunks that help answer the question.")
    order: list[int] = Field(default_factory=list, description="The relevant chunk numbers, best first.")
    request_more: bool = Field(description="True if the relevant chunks are not enough to answer.")
    reason: str = ""


class RatedRetrievalReply(RetrievalReply):
    ratings: list[float] = Field(description="Relevance 0-1 of each chunk shown, in order.")


@lru_cache(maxsize=64)
def rated_reply_model(count: int) -> type[RatedRetrievalReply]:
    """The rated reply for ``count`` chunks: exactly ``count`` ratings in 0-1, so a
    schema-constrained backend cannot copy the example's two (as the 135M model otherwise does)."""
    ratings = Annotated[list[Annotated[float, Field(ge=0.0, le=1.0)]], Field(min_length=count, max_length=count)]
    return create_model(f"RatedRetrievalReply{count}", __base__=RatedRetrievalReply,
                        ratings=(ratings, Field(description="Relevance 0-1 of each chunk shown, in order.")))


SYSTEM = "You judge search results for a question. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Question: Why do cats purr?\n"
    "[1] Stocks fell after the rate rise.\n"
    "[2] Cats purr when they are content.\n"
    '{"refined_query": "why cats purr", "relevant": [2], "order": [2], "request_more": false, '
    '"reason": "[2] explains purring"}'
)


RATED_EXAMPLE = (
    "Example:\n"
    "Question: Why do cats purr?\n"
    "[1] Stocks fell after the rate rise.\n"
    "[2] Cats purr when they are content.\n"
    '{"refined_query": "why cats purr", "relevant": [2], "order": [2], "request_more": false, '
    '"reason": "[2] explains purring", "ratings": [0.0, 0.9]}'
)


def build_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, conversation: str = "",
                 rated: bool = False, show_file_name: bool = False) -> str:
    """``conversation``: the turns before a follow-up (``prompts.conversation_block``), or empty;
    ``rated``: also ask for a 0-1 rating of each chunk (the relevance filter); ``show_file_name``:
    each preview after its source file name, ``[1] (file: notes.txt) text``."""
    ratings = f", and ratings (relevance 0 to 1 of each of the {len(nodes)} chunks, in order)" if rated else ""
    chunks = numbered_chunks(nodes, chunk_chars, label=source_label if show_file_name else None)
    return (
        f"{RATED_EXAMPLE if rated else EXAMPLE}\n\n{conversation}"
        f"Question: {query}\n{chunks}\n"
        "Which chunks help answer the question? Reply as JSON with refined_query, relevant (chunk numbers), "
        f"order (relevant numbers, best first), request_more (true if they are not enough) and reason{ratings}."
    )


def valid_numbers(numbers: list[int], count: int) -> tuple[list[int], list[int]]:
    """``(kept, dropped)``: numbers in 1..count, first occurrence only; the rest are dropped."""
    kept: list[int] = []
    dropped: list[int] = []
    for number in numbers:
        if 1 <= number <= count and number not in kept:
            kept.append(number)
        else:
            dropped.append(number)
    return kept, dropped


def merge_nodes(*lists: list[NodeWithScore]) -> list[NodeWithScore]:
    """One node per id with its best score, best first (ties keep first-seen order)."""
    best: dict[str, NodeWithScore] = {}
    for nodes in lists:
        for node in nodes:
            seen = best.get(node.node.node_id)
            if seen is None or _score(node) > _score(seen):
                best[node.node.node_id] = node
    return sorted(best.values(), key=_score, reverse=True)


def _score(node: NodeWithScore) -> float:
    return float("-inf") if node.score is None else float(node.score)


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


class RetrievalJudge(RetrievalJudgeInfo, Stage):
    params: RetrievalJudgeParams

    def __init__(self, params: RetrievalJudgeParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def refine(self, query: str, nodes: list[NodeWithScore], retriever: BaseRetriever,
               trace: JudgementLog, history: Sequence[ConversationTurn] = ()) -> list[NodeWithScore]:
        """The judged chunks; ``nodes`` unchanged when the judge is off or a reply is unusable.

        ``history``: the conversation before a follow-up, shown (its last 4 turns) before the question."""
        if not self.enabled:
            return list(nodes)
        conversation = conversation_block(history, 4, 300)
        if self.params.loop == "evaluate_refine":
            return evaluate_refine(self, query, nodes, retriever, trace, conversation, merge_nodes)
        pool = merge_nodes(nodes)
        current_query = query
        for iteration in range(1, self.params.max_iterations + 1):
            started = time.perf_counter()
            shown = pool[: self.params.max_chunks]
            summary = f"round {iteration}: {current_query} | {len(shown)} chunks"
            decision: dict[str, Any] = {"iteration": iteration, "query": current_query, "shown": _ids(shown)}
            if not shown:
                trace.add(self.judgement(summary, {**decision, "action": "nothing to judge"}, started=started))
                return []
            rated = self.params.min_relevance is not None
            try:
                prompt = build_prompt(current_query, shown, self.params.chunk_chars, conversation, rated,
                                      self.params.show_file_name)
                result = self.ask(prompt,
                                  rated_reply_model(len(shown)) if rated else RetrievalReply,
                                  system=SYSTEM, max_tokens=self.params.max_tokens)
            except LLMError as call_error:
                trace.add(self.fallback(summary, decision, None, started, str(call_error)))
                return list(nodes)
            reply = result.parsed
            if reply is None:
                trace.add(self.fallback(summary, decision, result, started, None))
                return list(nodes)

            relevant, dropped = valid_numbers(reply.relevant, len(shown))
            order, dropped_order = valid_numbers(reply.order, len(shown))
            dropped += [number for number in dropped_order if number not in dropped]
            if reply.relevant and not relevant:  # well-formed JSON, but it names none of the chunks shown
                error = f"no chunk number in 1..{len(shown)}: relevant={reply.relevant}"
                trace.add(self.fallback(summary, {**decision, "dropped_numbers": dropped}, result, started, error))
                return list(nodes)
            ranked = [number for number in order if number in relevant]
            ranked += [number for number in relevant if number not in ranked]
            if rated:
                ratings = cast(RatedRetrievalReply, reply).ratings  # one per chunk shown: the schema says so
                threshold = cast(float, self.params.min_relevance)
                below = [shown[n - 1].node.node_id for n in ranked if ratings[n - 1] < threshold]
                ranked = [n for n in ranked if ratings[n - 1] >= threshold]
                decision.update(ratings={node.node.node_id: float(r) for node, r in zip(shown, ratings)},
                                filtered=below)
            decision.update(
                refined_query=reply.refined_query, relevant=[shown[n - 1].node.node_id for n in ranked],
                request_more=reply.request_more, reason=reply.reason, dropped_numbers=dropped,
            )

            added: list[str] = []
            if reply.request_more and iteration < self.params.max_iterations:
                current_query = reply.refined_query.strip() or current_query
                known = set(_ids(pool))
                fresh = retriever.retrieve(current_query)
                added = [node_id for node_id in _ids(fresh) if node_id not in known]
                pool = merge_nodes(pool, fresh)
            if added:
                decision.update(action="retrieve more", added=added)
                trace.add(self.judgement(summary, decision, result, started=started))
                continue

            if not reply.relevant and self.params.none_relevant == "keep_all":
                # The design keeps every chunk when the model finds none relevant: it never empties the context.
                decision.update(action="final", stopped="none relevant: kept all", kept=_ids(pool), dropped=[])
                trace.add(self.judgement(summary, decision, result, started=started))
                return list(pool)
            final = [shown[n - 1] for n in ranked]
            kept = set(_ids(final))
            if self.params.keep_unjudged:
                final += [node for node in pool if node.node.node_id not in kept]
                kept = set(_ids(final))
            if reply.request_more:
                stop = "max_iterations" if iteration == self.params.max_iterations else "no new chunks"
            else:
                stop = "enough"
            decision.update(action="final", stopped=stop, kept=_ids(final),
                            dropped=[i for i in _ids(pool) if i not in kept])
            trace.add(self.judgement(summary, decision, result, started=started))
            return final
        raise AssertionError("unreachable: the last round always returns")

