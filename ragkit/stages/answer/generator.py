"""Generator: answer the question from the retrieved chunks, citing them as [1], [2], ...

The chunks are shown numbered (short numbers, not chunk ids, which a small model garbles) and
cut to fit a small context; each cited number maps back to its chunk id. With ``constrained``
the reply is JSON ``{answer, citations}``; without it the reply is free text and the citations
are the ``[n]`` markers in it. A JSON reply that cannot be parsed keeps the raw text as the
answer (citations from its markers), marked invalid. It is always on when generation is
configured, so it has no ``off`` mode; its calls are recorded under the stage ``generate``.

Options, each off by default (off, it leaves no trace in the prompt): ``system_prompt`` replaces
the system message; ``abstain_text`` is the answer when no chunk is left to answer from (no LLM
call); ``feedback`` lists claims a groundedness check did not find supported, for a regenerated
answer; ``history`` shows the conversation before a follow-up question. ``converse`` answers
without sources (the router's conversational route) and ``abstain`` answers "not found" without
asking the model.

Off by default too: ``context_fit: window`` shows whole chunks, as many as the model's context
window holds (``context_fit``; the fixed limits stay for a model that declares no window, such as
the bundled SmolLM2-135M), and ``temperature`` samples the answers at that temperature instead of
the LLM's own. Every answer records how its context was sized and what was cut
(``decision["context"]``).

Off by default too, for the agentic design (``ragkit.stages.answer.answer_prompt``):
``prompt_layout: xml`` writes the prompt as XML elements, and ``quality_instructions`` adds an
instruction chosen by the retrieval quality the pipeline passes in (``retrieval_quality``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.llms.calls import LLMClient, LLMResult
from ragkit.stages.answer.answer_prompt import QUALITY_TEXT, quality_tier, xml_prompt, xml_sources
from ragkit.stages.answer.context_fit import fit_context, no_label
from ragkit.stages.answer.params import GeneratorInfo, GeneratorParams
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.prompts import ConversationTurn, conversation_block, source_label, source_name, with_source_names
from ragkit.text import cited_numbers

STAGE = "generate"


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
    abstained: bool = False


SYSTEM = "You answer questions using only the numbered sources and cite them like [1]."
CONVERSE_SYSTEM = "You are a helpful assistant in a conversation. Reply briefly and politely."
NOT_FOUND = "not found"

EXAMPLE_SOURCES = "[1] Stocks fell after the rate rise.\n[2] Air scatters blue light more than red light."
EXAMPLE_QUESTION = "Why is the sky blue?"
EXAMPLE_JSON = '{"answer": "Air scatters blue light more than red [2].", "citations": [2]}'
EXAMPLE_TEXT = "Air scatters blue light more than red [2]."


def numbered_sources(texts: list[str]) -> str:
    return "\n".join(f"[{number}] {text}" for number, text in enumerate(texts, start=1)) or "(no sources)"


def build_prompt(query: str, texts: list[str], constrained: bool, feedback: Sequence[str] = (),
                 conversation: str = "", sources_here: bool = True, quality: str = "") -> str:
    """The answer prompt; ``feedback`` (unsupported claims), ``conversation`` (earlier turns,
    see ``conversation_block``) and ``quality`` (the retrieval quality's instruction) add a block
    each; without them the prompt has none of these blocks. ``sources_here`` False: the sources are
    in the system message (``context_in: system``)."""
    sources = f"Sources:\n{numbered_sources(texts)}\n" if sources_here else ""
    example = EXAMPLE_JSON if constrained else EXAMPLE_TEXT
    ask = ask_text(constrained)
    warning = ""
    if feedback:
        listed = "\n".join(f"- {claim}" for claim in feedback)
        warning = ("These statements were not supported by the sources; do not repeat them unless a source "
                   f"states them:\n{listed}\n")
    told = f"{quality}\n" if quality else ""
    return (
        f"Example:\nSources:\n{EXAMPLE_SOURCES}\nQuestion: {EXAMPLE_QUESTION}\n{example}\n\n"
        f"{conversation}{sources}Question: {query}\n{warning}{told}{ask}"
    )


def ask_text(constrained: bool) -> str:
    return ("Reply as JSON with answer and citations." if constrained
            else "Answer in one or two sentences and cite sources like [1].")


class Generator(GeneratorInfo, Stage):
    params: GeneratorParams

    def __init__(self, params: GeneratorParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def generate(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog, *,
                 feedback: Sequence[str] | None = None, history: Sequence[ConversationTurn] = (),
                 retrieval_quality: float | None = None) -> Answer:
        """The answer with its citations mapped to chunk ids; recorded in ``trace`` as judge ``generator``.

        With ``abstain_text`` set and no chunk to show, the answer is that text and no call is made.
        ``retrieval_quality`` (0-1, None: unknown) is read only with ``quality_instructions``."""
        started = time.perf_counter()
        p = self.params
        system = p.system_prompt or SYSTEM
        conversation = conversation_block(history, p.history_turns, p.turn_chars)
        tier = quality_tier(retrieval_quality, p.quality_high, p.quality_low) if p.quality_instructions else None
        told = QUALITY_TEXT[tier] if tier is not None else ""
        around = self._prompt(query, [], [], feedback or (), conversation, True, told)  # the prompt but its sources
        fitted = fit_context(nodes, p.context_fit, max_chunks=p.max_chunks, chunk_chars=p.chunk_chars,
                             max_context_chars=p.max_context_chars,
                             window_tokens=self.client().backend.context_window(), answer_tokens=p.max_tokens,
                             prompt_chars=len(around) + len(system),
                             label=source_label if p.show_file_name else no_label)
        shown = fitted.shown
        if not shown and p.abstain_text is not None:
            return self.abstain(query, "no chunk left to answer from", trace)
        xml = p.prompt_layout == "xml"
        # The XML layout names a chunk's file in an attribute, not in its text.
        texts = with_source_names(shown) if p.show_file_name and not xml else [text for _, text in shown]
        files = [source_name(node) for node, _ in shown] if p.show_file_name else []
        in_system = p.context_in == "system"
        prompt = self._prompt(query, texts, files, feedback or (), conversation, not in_system, told)
        if in_system:
            system = f"{system}\n\n{xml_sources(texts, files)}" if xml \
                else f"{system}\n\nSources:\n{numbered_sources(texts)}"
        summary = f"{query} | {len(shown)} chunks"
        decision: dict[str, Any] = {"prompt": prompt, "shown": [node.node.node_id for node, _ in shown],
                                    "context": fitted.record}
        if p.quality_instructions:
            decision.update(retrieval_quality=retrieval_quality, quality_tier=tier)
        if in_system:
            decision["system"] = system
        if feedback:
            decision["feedback"] = list(feedback)
        try:
            result = self.client().call(prompt, stage=STAGE, schema=GeneratorReply if p.constrained else None,
                                        system=system, max_tokens=p.max_tokens, cache_salt=self.cache_salt())
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

    def _prompt(self, query: str, texts: list[str], files: list[str], feedback: Sequence[str], conversation: str,
                sources_here: bool, quality: str) -> str:
        """The answer prompt in the params' layout."""
        constrained = self.params.constrained
        if self.params.prompt_layout == "xml":
            return xml_prompt(query, texts, files, ask=ask_text(constrained),
                              example_reply=EXAMPLE_JSON if constrained else EXAMPLE_TEXT, feedback=feedback,
                              conversation=conversation, sources_here=sources_here, quality=quality)
        return build_prompt(query, texts, constrained, feedback, conversation, sources_here, quality)

    def abstain(self, query: str, reason: str, trace: JudgementLog) -> Answer:
        """``abstain_text`` (or "not found") as the answer, without asking the model; recorded."""
        started = time.perf_counter()
        text = self.params.abstain_text or NOT_FOUND
        trace.add(self.judgement(f"{query} | abstained", {"action": "abstained", "reason": reason, "answer": text},
                                 started=started))
        return Answer(text, [], prompt="", valid=True, abstained=True)

    def converse(self, query: str, history: Sequence[ConversationTurn], trace: JudgementLog) -> Answer:
        """A conversational reply without sources (the router's conversational route): free text."""
        started = time.perf_counter()
        p = self.params
        prompt = (f"{conversation_block(history, p.history_turns, p.turn_chars)}user: {' '.join(query.split())}\n"
                  "Reply in one or two sentences.")
        summary = f"{query} | conversational"
        decision: dict[str, Any] = {"prompt": prompt, "route": "conversational"}
        try:
            result = self.client().call(prompt, stage=STAGE, system=CONVERSE_SYSTEM, max_tokens=p.max_tokens,
                                        cache_salt=self.cache_salt())
        except LLMError as call_error:
            trace.add(self.judgement(summary, {**decision, "action": "no answer"}, started=started,
                                     fell_back=True, error=str(call_error)))
            return Answer("", [], prompt, valid=False, error=str(call_error))
        text = result.text.strip()
        error = None if text else "empty reply"
        trace.add(self.judgement(summary, {**decision, "answer": text}, result, started=started,
                                 fell_back=error is not None, error=error))
        return Answer(text, [], prompt, valid=error is None, error=error)

    def client(self) -> LLMClient:
        """The LLM client, at the answers' own ``temperature`` when one is set (the same cache,
        model and usage records; another cache key, since the replies may differ)."""
        client = self.llm_client()
        temperature = self.params.temperature
        return client if temperature is None else client.with_backend_params(temperature=temperature)

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
