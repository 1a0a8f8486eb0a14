"""Generator: answer the question from the retrieved chunks, citing them as [1], [2], ...

The chunks are shown numbered (short numbers, not chunk ids, which a small model garbles) and
cut to fit a small context; each cited number maps back to its chunk id. With ``constrained``
the reply is JSON ``{answer, citations}``; without it the reply is free text and the citations
are the ``[n]`` markers in it. A JSON reply that cannot be parsed keeps the raw text as the
answer (citations from its markers), marked invalid. It is always on when generation is
configured, so it has no ``off`` mode; its calls are recorded under the stage ``generate``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, Field

from ragkit.judges.base import Judge, JudgeParams, JudgeTrace
from ragkit.llms.base import LLMError
from ragkit.llms.calls import LLMResult

STAGE = "generate"
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


class GeneratorParams(JudgeParams):
    constrained: bool = Field(
        default=True, description="Ask for JSON {answer, citations}; off: free text, citations read from [n]."
    )
    max_chunks: int = Field(default=5, ge=1, le=50, description="Most chunks shown to the model.")
    chunk_chars: int = Field(default=400, ge=40, le=8000, description="Characters of each chunk shown.")
    max_context_chars: int = Field(
        default=2000, ge=100, le=100_000, description="Characters of all chunks shown together (small context)."
    )
    max_tokens: int = Field(default=200, ge=8, le=4096, description="Most tokens in the answer.")


class GeneratorReply(BaseModel):
    answer: str = Field(description="The answer, citing sources like [1].")
    citations: list[int] = Field(default_factory=list, description="Numbers of the sources the answer uses.")


@dataclass
class Answer:
    text: str
    citations: list[str]  # chunk ids, in the order first cited
    prompt: str
    valid: bool
    error: str | None = None
    cited_numbers: list[int] = field(default_factory=list)


SYSTEM = "You answer questions using only the numbered sources and cite them like [1]."

EXAMPLE_SOURCES = "[1] Stocks fell after the rate rise.\n[2] Air scatters blue light more than red light."
EXAMPLE_QUESTION = "Why is the sky blue?"
EXAMPLE_JSON = '{"answer": "Air scatters blue light more than red [2].", "citations": [2]}'
EXAMPLE_TEXT = "Air scatters blue light more than red [2]."


def shown_chunks(nodes: list[NodeWithScore], max_chunks: int, chunk_chars: int,
                 max_context_chars: int) -> list[tuple[NodeWithScore, str]]:
    """The chunks shown and their one-line text: at most ``max_chunks``, together within ``max_context_chars``."""
    shown: list[tuple[NodeWithScore, str]] = []
    budget = max_context_chars
    for node in nodes[:max_chunks]:
        text = " ".join(node.node.get_content().split())[: min(chunk_chars, budget)]
        if not text:
            break
        shown.append((node, text))
        budget -= len(text)
        if budget <= 0:
            break
    return shown


def build_prompt(query: str, texts: list[str], constrained: bool) -> str:
    sources = "\n".join(f"[{number}] {text}" for number, text in enumerate(texts, start=1)) or "(no sources)"
    example = EXAMPLE_JSON if constrained else EXAMPLE_TEXT
    ask = ("Reply as JSON with answer and citations." if constrained
           else "Answer in one or two sentences and cite sources like [1].")
    return (
        f"Example:\nSources:\n{EXAMPLE_SOURCES}\nQuestion: {EXAMPLE_QUESTION}\n{example}\n\n"
        f"Sources:\n{sources}\nQuestion: {query}\n{ask}"
    )


def cited_numbers(text: str) -> list[int]:
    """Numbers in ``[1]`` or ``[1, 2]`` markers, in order, each once."""
    numbers: list[int] = []
    for match in _CITATION.finditer(text):
        for part in match.group(1).split(","):
            number = int(part)
            if number not in numbers:
                numbers.append(number)
    return numbers


class Generator(Judge):
    name: ClassVar[str] = "generator"
    Params: ClassVar[type[GeneratorParams]] = GeneratorParams
    params: GeneratorParams
    modes: ClassVar[tuple[str, ...]] = ("llm",)

    def __init__(self, params: GeneratorParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def generate(self, query: str, nodes: list[NodeWithScore], trace: JudgeTrace) -> Answer:
        """The answer with its citations mapped to chunk ids; recorded in ``trace`` as judge ``generator``."""
        started = time.perf_counter()
        p = self.params
        shown = shown_chunks(nodes, p.max_chunks, p.chunk_chars, p.max_context_chars)
        prompt = build_prompt(query, [text for _, text in shown], p.constrained)
        summary = f"{query} | {len(shown)} chunks"
        decision: dict[str, Any] = {"prompt": prompt, "shown": [node.node.node_id for node, _ in shown]}
        try:
            result = self.llm_client().call(prompt, stage=STAGE, schema=GeneratorReply if p.constrained else None,
                                            system=SYSTEM, max_tokens=p.max_tokens, cache_salt=self.cache_salt())
        except LLMError as call_error:
            trace.add(self.judgement(summary, {**decision, "action": "no answer"}, started=started,
                                     fell_back=True, error=str(call_error)))
            return Answer("", [], prompt, valid=False, error=str(call_error))

        text, numbers, error = self._read(result)
        cited = [n for n in numbers if 1 <= n <= len(shown)]
        answer = Answer(
            text=text,
            citations=[shown[n - 1][0].node.node_id for n in cited],
            prompt=prompt,
            valid=error is None,
            error=error,
            cited_numbers=cited,
        )
        decision.update(answer=text, citations=answer.citations,
                        dropped_citations=[n for n in numbers if n not in cited])
        judgement = self.judgement(summary, decision, result, started=started, fell_back=error is not None,
                                   error=error)
        judgement.valid = answer.valid
        trace.add(judgement)
        return answer

    def _read(self, result: LLMResult) -> tuple[str, list[int], str | None]:
        """``(answer text, cited numbers, error)`` of a reply; an error marks the answer invalid."""
        if self.params.constrained and isinstance(result.parsed, GeneratorReply):
            reply = result.parsed
            text = reply.answer.strip()
            if not text:
                return "", [], "empty answer"
            return text, list(dict.fromkeys(reply.citations + cited_numbers(text))), None
        text = result.text.strip()
        if not text:
            return "", [], "empty reply"
        if self.params.constrained:  # unparseable JSON: keep the raw text, marked invalid
            return text, cited_numbers(text), result.parse_error
        return text, cited_numbers(text), None
