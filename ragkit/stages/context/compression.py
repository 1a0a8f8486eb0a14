"""Contextual compression: keep the sentences of each chunk that bear on the question.

The last context stage (after rerank and enrichment), so the generator reads only what bears on
the question: each chunk is split into sentences (``ragkit.text.sentence_spans``) and the kept
sentences, in their order, become the chunk's text. A chunk none of whose sentences bears on the
question is dropped, as the design's extractor drops a document it has nothing to extract from.
Kept chunks keep their id, score and metadata (document and offsets, so relevance is judged as
before), plus ``compressed_from_chars``. The span metrics of the final context still read a
kept chunk's original offsets, so a span in a sentence it lost counts as covered: compression
shows in ``final_tokens``, in dropped chunks and in the answers, not in a kept chunk's span recall.

Modes: ``off`` passes the chunks on untouched (the baseline the grid pairs with);
``heuristic`` keeps a sentence holding at least ``min_overlap`` of the question's content words
(at least one; plurals folded, ``ragkit.text.content_words`` and ``word_stem``); ``llm`` shows the
chunk's numbered sentences and asks which bear on the question, one call per chunk. A reply that
cannot be used (unparseable, numbers outside the chunk) keeps that chunk whole and is recorded
invalid, as is a question with no content word in heuristic mode (every chunk kept whole).
Each chunk's decision is one judgement: the sentence numbers kept, characters before and after.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache
from typing import Annotated, Any

from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import BaseModel, Field, create_model

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.context.params import CompressionJudgeInfo, CompressionParams
from ragkit.text import content_words, sentence_spans, word_stem


class CompressionReply(BaseModel):
    sentences: list[int] = Field(description="Numbers of the sentences that help answer the question.")


@lru_cache(maxsize=64)
def reply_model(count: int) -> type[CompressionReply]:
    """The reply schema for a chunk of ``count`` sentences: numbers 1..count, each at most once
    (a schema-constrained backend then cannot name a sentence the chunk does not have)."""
    numbers = Annotated[list[Annotated[int, Field(ge=1, le=count)]], Field(max_length=count)]
    described = Field(description="Numbers of the sentences that help answer the question.")
    return create_model(f"CompressionReply{count}", __base__=CompressionReply, sentences=(numbers, described))


SYSTEM = "You pick the sentences of a text that help answer a question. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Question: Why is the sky blue?\n"
    "[1] Stocks fell after the rate rise.\n"
    "[2] Air scatters blue light more than red light.\n"
    "[3] Sunsets look red for the same reason.\n"
    '{"sentences": [2, 3]}'
)


def build_prompt(query: str, sentences: list[str]) -> str:
    numbered = "\n".join(f"[{number}] {sentence}" for number, sentence in enumerate(sentences, start=1))
    return (f"{EXAMPLE}\n\nQuestion: {query}\n{numbered}\n"
            "Reply as JSON with sentences: the numbers of the sentences that help answer the question "
            "(an empty list if none does).")


def split_sentences(text: str) -> list[str]:
    """The chunk's sentences, each on one line."""
    return [" ".join(text[start:end].split()) for start, end in sentence_spans(text)]


def stems(text: str) -> set[str]:
    return {word_stem(word) for word in content_words(text)}


def overlap_kept(query: str, sentences: list[str], min_overlap: float) -> tuple[list[int], list[int]]:
    """(kept sentence numbers, 1-based; shared content words of every sentence) by the heuristic."""
    wanted = stems(query)
    needed = max(1, math.ceil(min_overlap * len(wanted)))
    shared = [len(wanted & stems(sentence)) for sentence in sentences]
    return [number for number, count in enumerate(shared, start=1) if count >= needed], shared


def compressed(node: NodeWithScore, sentences: list[str], kept: list[int]) -> NodeWithScore | None:
    """The chunk as its kept sentences (None when none is kept; the node itself when all are)."""
    if not kept:
        return None
    if len(kept) == len(sentences) or not isinstance(node.node, TextNode):
        return node
    original = node.node.get_content()
    metadata = {**node.node.metadata, "compressed_from_chars": len(original)}
    text = " ".join(sentences[number - 1] for number in kept)
    return NodeWithScore(node=node.node.model_copy(update={"text": text, "metadata": metadata}), score=node.score)


class CompressionJudge(CompressionJudgeInfo, Stage):
    params: CompressionParams

    def __init__(self, params: CompressionParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        """The context role's call: each chunk cut to its sentences that bear on ``query``."""
        if not self.enabled:
            return list(nodes)
        result: list[NodeWithScore] = []
        for node in nodes:
            kept = self._compress(query, node, trace)
            if kept is not None:
                result.append(kept)
        return result

    def _compress(self, query: str, node: NodeWithScore, trace: JudgementLog) -> NodeWithScore | None:
        started = time.perf_counter()
        text = node.node.get_content()
        sentences = split_sentences(text)
        if not sentences:  # an empty chunk: nothing to choose from
            return node
        summary = f"{query} | chunk {node.node.node_id} | {len(sentences)} sentences"
        decision: dict[str, Any] = {"method": self.params.mode, "chunk": node.node.node_id,
                                    "sentences": len(sentences), "chars_before": len(text)}
        if self.params.mode == "heuristic":
            if not stems(query):
                trace.add(self.fallback(summary, {**decision, "kept": "whole"}, None, started,
                                        "the question has no content words to compare sentences with"))
                return node
            kept, shared = overlap_kept(query, sentences, self.params.min_overlap)
            decision["shared_words"] = shared
            return self._record(node, sentences, kept, decision, trace, summary, started)
        try:
            result = self.ask(build_prompt(query, sentences), reply_model(len(sentences)), system=SYSTEM,
                              max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(summary, {**decision, "kept": "whole"}, None, started, str(error)))
            return node
        if result.parsed is None:
            trace.add(self.fallback(summary, {**decision, "kept": "whole"}, result, started, result.parse_error))
            return node
        kept = sorted(set(result.parsed.sentences))
        return self._record(node, sentences, kept, decision, trace, summary, started, result)

    def _record(self, node: NodeWithScore, sentences: list[str], kept: list[int], decision: dict[str, Any],
                trace: JudgementLog, summary: str, started: float, result: Any = None) -> NodeWithScore | None:
        out = compressed(node, sentences, kept)
        decision.update(kept=kept, chars_after=len(out.node.get_content()) if out is not None else 0,
                        action="dropped" if out is None else "kept whole" if out is node else "compressed")
        trace.add(self.judgement(summary, decision, result, started=started))
        return out
