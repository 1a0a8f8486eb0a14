"""Router: decides per question whether the documents, a conversational answer or the web should reply.

The router compares the question with the corpus summary (``ragkit.corpus.summary``, written once
per corpus and passed in as ``summary``) and gives a route and a relevance verdict (does the
corpus cover the question: yes / no / maybe).

``heuristic`` mode, no LLM:

1. Small talk: the message holds a greeting, thanks or small-talk word ("hi", "thanks", "you")
   and no content word besides -> ``conversational``, relevance no.
2. Otherwise the share of the question's content words (function words and numbers dropped,
   plurals folded) found in the summary's vocabulary decides: at least ``yes_share`` ->
   ``documents``, relevance yes; at least ``maybe_share`` -> ``documents``, relevance maybe;
   below -> ``web``, relevance no.
3. A question without content words, or an empty summary, cannot be compared: ``documents``
   (the router-off behaviour), recorded as a fallback.

Confidence says how clear-cut the rule was: the share itself for yes, 0.5 for maybe, one minus
the share for web, 0.9 for small talk. The heuristic reads the question alone, not the history:
a follow-up ("and in dogs?") is best made standalone by the condense judge first.

``llm`` mode shows the model the summary (cut to ``summary_chars``), the conversation so far
when there is one, and the message, and asks for ``{route, relevance, confidence, reason}``.
A reply that cannot be used routes to ``documents``, recorded invalid.

``decisions: two`` (off: ``one``, the single decision above) routes as the dynamic-documents
design does, in two decisions, each recorded as a judgement of its own (``step``: relevance,
then source):

1. relevance: do the documents cover the question? yes or maybe -> ``documents``, done.
2. only when they do not: the source, ``conversational`` or ``web``.

In ``llm`` mode each decision is one call (prompts in ``router_prompts``); in ``heuristic`` mode
relevance is the vocabulary share above (a message of small-talk words only is relevance no),
and the source is ``conversational`` for small talk only, else ``web``. An unusable reply at
either decision routes to ``documents``, recorded invalid, as in one decision.

``summary_scope: document`` (off: ``corpus``) compares the question with the summary of the
document(s) it names (its ``document`` field, given as ``documents``; ``ragkit.corpus.document_summary``,
passed in as ``document_summaries``) instead of the collection's, as the dynamic-documents design
decides relevance against the loaded document. A question that names none, or only documents
without a summary, is compared with the corpus summary; each judgement records what it read
(``summary_of``: the document ids, or ``corpus`` and why).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.llms.calls import LLMResult
from ragkit.llms.parsing import ModelT
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.prompts import ConversationTurn
from ragkit.stages.query.params import RouterJudgeInfo, RouterParams
from ragkit.stages.query.router import prompts as router_prompts
from ragkit.stages.query.router.prompts import RelevanceReply, SourceReply, conversation_block
from ragkit.text import content_words, word_stem, words

Route = Literal["documents", "conversational", "web"]
Relevance = Literal["yes", "no", "maybe"]
ROUTES: tuple[Route, ...] = ("documents", "conversational", "web")

# Words of greetings, thanks and chat about the assistant itself: a message made only of these
# (and function words) needs no sources.
SMALL_TALK_WORDS = frozenset(
    "hi hello hey hiya howdy greetings morning afternoon evening good night thanks thank thx cheers bye "
    "goodbye later ok okay great cool nice awesome perfect fine well please sure yes yeah yep nope you your "
    "yourself doing today help welcome appreciate appreciated lot much name bot assistant".split()
)
SMALL_TALK_CONFIDENCE = 0.9
MAYBE_CONFIDENCE = 0.5


class RouteReply(BaseModel):
    route: Route = Field(description="documents, conversational or web.")
    relevance: Relevance = Field(description="Do the documents cover the message: yes, no or maybe.")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="How sure the choice is, 0 to 1.")
    reason: str = ""


@dataclass(frozen=True)
class RouteDecision:
    """The route taken. ``valid`` is False when the router could not decide and ``documents``,
    the router-off route, was taken instead."""

    route: Route
    relevance: Relevance
    confidence: float | None
    valid: bool
    reason: str = ""


OFF_DECISION = RouteDecision("documents", "maybe", None, True, "router off")
UNUSABLE_DECISION = RouteDecision("documents", "maybe", None, False, "unusable reply")

SYSTEM = "You route a user's message to the right source of answers. Reply with one JSON object only."

EXAMPLES = (
    "Examples:\n"
    "Documents: Recipes for breads and cakes; baking times, flour, yeast.\n"
    "Message: Thanks, that helped!\n"
    '{"route": "conversational", "relevance": "no", "confidence": 0.9, "reason": "thanks, no question"}\n'
    "Message: Who won the football match last night?\n"
    '{"route": "web", "relevance": "no", "confidence": 0.8, "reason": "recent sports news, not baking"}\n'
    "Message: How long should sourdough rise?\n"
    '{"route": "documents", "relevance": "yes", "confidence": 0.9, "reason": "bread recipes cover rising"}'
)


def build_prompt(question: str, summary: str, history: Sequence[ConversationTurn], turn_chars: int) -> str:
    """``history``: the turns to show, already cut to the most recent ones."""
    conversation = conversation_block(history, turn_chars)
    return (
        f"{EXAMPLES}\n\nDocuments: {summary or '(no description)'}\n{conversation}Message: {question}\n"
        "Route: documents if the documents can answer it, conversational for greetings, thanks or small talk "
        "that needs no sources, web if it needs information the documents do not hold. Reply as JSON with "
        "route, relevance (yes, no or maybe: do the documents cover it), confidence (0 to 1) and reason."
    )


def vocabulary(summary: str) -> frozenset[str]:
    return frozenset(word_stem(word) for word in content_words(summary))


class RouterJudge(RouterJudgeInfo, Stage):
    params: RouterParams

    def __init__(self, params: RouterParams, llm: Any = None, *, summary: str = "",
                 document_summaries: Mapping[str, Any] | None = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)
        self.summary = summary
        self._vocabulary = vocabulary(summary)
        # doc id -> its summary (text, or an object with ``text``: ragkit.corpus.document_summary)
        self.document_summaries = {doc_id: str(getattr(item, "text", item))
                                   for doc_id, item in (document_summaries or {}).items()}
        self._read: tuple[str, frozenset[str], dict[str, Any]] = (summary, self._vocabulary, {})

    def route(self, question: str, history: Sequence[ConversationTurn], trace: JudgementLog,
              documents: Sequence[str] | None = None) -> RouteDecision:
        """Where the question goes; ``documents`` with nothing recorded when off. ``documents``: the
        ones the question names (read with ``summary_scope: document``)."""
        if not self.enabled:
            return OFF_DECISION
        started = time.perf_counter()
        self._read = self._summary_for(documents)
        seen = question if not history else f"{question} | after {len(history)} turns"
        if self.params.decisions == "two":
            if self.params.mode == "heuristic":
                return self._heuristic_two(question, seen, started, trace)
            return self._llm_two(question, history, seen, started, trace)
        if self.params.mode == "heuristic":
            return self._heuristic(question, seen, started, trace)
        return self._llm(question, history, seen, started, trace)

    def _summary_for(self, documents: Sequence[str] | None) -> tuple[str, frozenset[str], dict[str, Any]]:
        """The summary the question is compared with, its vocabulary, and what the judgement
        records of it (nothing with ``summary_scope: corpus``: the records stay as they were)."""
        if self.params.summary_scope == "corpus":
            return self.summary, self._vocabulary, {}
        named = list(dict.fromkeys(documents or ()))
        found = [doc_id for doc_id in named if doc_id in self.document_summaries]
        if not found:
            why = ("the question names no document" if not named
                   else f"no summary of {', '.join(named)}")
            return self.summary, self._vocabulary, {"summary_of": "corpus", "summary_reason": why}
        text = "\n".join(self.document_summaries[doc_id] for doc_id in found)
        return text, vocabulary(text), {"summary_of": found}

    def _heuristic(self, question: str, seen: str, started: float, trace: JudgementLog) -> RouteDecision:
        topical = [word for word in content_words(question) if word not in SMALL_TALK_WORDS]
        if not topical and any(word in SMALL_TALK_WORDS for word in words(question)):
            decision = RouteDecision("conversational", "no", SMALL_TALK_CONFIDENCE, True, "small talk only")
            trace.add(self.judgement(seen, self._record(decision, method="heuristic"), started=started))
            return decision
        stems = list(dict.fromkeys(word_stem(word) for word in topical))
        problem = ("the question has no content words" if not stems
                   else "no corpus summary to compare with" if not self._read[1] else None)
        if problem is not None:
            decision = RouteDecision("documents", "maybe", None, False, problem)
            trace.add(self.judgement(seen, self._record(decision, method="heuristic", action="fell back"),
                                     started=started, fell_back=True, error=problem))
            return decision
        matched, share, reason = self._compare(stems)
        if share >= self.params.yes_share:
            decision = RouteDecision("documents", "yes", round(share, 4), True, reason)
        elif share >= self.params.maybe_share:
            decision = RouteDecision("documents", "maybe", MAYBE_CONFIDENCE, True, reason)
        else:
            decision = RouteDecision("web", "no", round(1.0 - share, 4), True, reason)
        record = self._record(decision, method="heuristic", share=round(share, 4), matched=matched,
                              unmatched=[stem for stem in stems if stem not in matched])
        trace.add(self.judgement(seen, record, started=started))
        return decision

    def _llm(self, question: str, history: Sequence[ConversationTurn], seen: str, started: float,
             trace: JudgementLog) -> RouteDecision:
        shown = list(history)[-self.params.history_turns:] if self.params.history_turns else []
        prompt = build_prompt(question, self._read[0][: self.params.summary_chars], shown, self.params.turn_chars)
        unusable = RouteDecision("documents", "maybe", None, False, "unusable reply")
        base = self._record(unusable, method="llm")
        try:
            result = self.ask(prompt, RouteReply, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(seen, base, None, started, str(error)))
            return unusable
        if result.parsed is None:
            trace.add(self.fallback(seen, base, result, started, result.parse_error))
            return unusable
        reply = result.parsed
        decision = RouteDecision(reply.route, reply.relevance, reply.confidence, True, reply.reason)
        trace.add(self.judgement(seen, self._record(decision, method="llm"), result, started=started))
        return decision

    def _compare(self, stems: list[str]) -> tuple[list[str], float, str]:
        """The question's stems found in the corpus vocabulary, their share and the reason in words."""
        matched = [stem for stem in stems if stem in self._read[1]]
        where = "the corpus" if self._read[0] is self.summary else "the document's"
        return matched, len(matched) / len(stems), f"{len(matched)}/{len(stems)} content words in {where} vocabulary"

    def _heuristic_two(self, question: str, seen: str, started: float, trace: JudgementLog) -> RouteDecision:
        topical = [word for word in content_words(question) if word not in SMALL_TALK_WORDS]
        stems = list(dict.fromkeys(word_stem(word) for word in topical))
        small_talk_only = not stems and any(word in SMALL_TALK_WORDS for word in words(question))
        # Decision 1, relevance: small talk alone covers nothing; otherwise the vocabulary share.
        relevance: Relevance
        extra: dict[str, Any]
        if small_talk_only:
            relevance, confidence, reason, extra = "no", SMALL_TALK_CONFIDENCE, "small talk only", {}
        else:
            problem = ("the question has no content words" if not stems
                       else "no corpus summary to compare with" if not self._read[1] else None)
            if problem is not None:
                decision = RouteDecision("documents", "maybe", None, False, problem)
                record = {"step": "relevance", **self._record(decision, method="heuristic", action="fell back")}
                trace.add(self.judgement(seen, record, started=started, fell_back=True, error=problem))
                return decision
            matched, share, reason = self._compare(stems)
            if share >= self.params.yes_share:
                relevance, confidence = "yes", round(share, 4)
            elif share >= self.params.maybe_share:
                relevance, confidence = "maybe", MAYBE_CONFIDENCE
            else:
                relevance, confidence = "no", round(1.0 - share, 4)
            extra = {"share": round(share, 4), "matched": matched,
                     "unmatched": [stem for stem in stems if stem not in matched]}
        route: Route | None = "documents" if relevance != "no" else None
        trace.add(self.judgement(seen, {"step": "relevance", "route": route, "relevance": relevance,
                                        "confidence": confidence, "reason": reason, "method": "heuristic",
                                        **extra, **self._read[2]}, started=started))
        if route is not None:
            return RouteDecision(route, relevance, confidence, True, reason)
        # Decision 2, the source: conversation needs none; anything else asks for information.
        started = time.perf_counter()
        decision = (RouteDecision("conversational", "no", SMALL_TALK_CONFIDENCE, True, "small talk only")
                    if small_talk_only else
                    RouteDecision("web", "no", confidence, True, "asks for what the documents do not cover"))
        trace.add(self.judgement(seen, {"step": "source", **self._record(decision, method="heuristic")},
                                 started=started))
        return decision

    def _llm_two(self, question: str, history: Sequence[ConversationTurn], seen: str, started: float,
                 trace: JudgementLog) -> RouteDecision:
        shown = list(history)[-self.params.history_turns:] if self.params.history_turns else []
        summary = self._read[0][: self.params.summary_chars]
        prompt = router_prompts.relevance_prompt(question, summary, shown, self.params.turn_chars)
        first = self._ask_step("relevance", prompt, RelevanceReply, seen, started, trace)
        if first is None or first.parsed is None:
            return UNUSABLE_DECISION
        relevant = first.parsed
        route: Route | None = "documents" if relevant.relevance != "no" else None
        trace.add(self.judgement(seen, {"step": "relevance", "route": route, "relevance": relevant.relevance,
                                        "confidence": relevant.confidence, "reason": relevant.reason,
                                        "method": "llm", **self._read[2]}, first, started=started))
        if route is not None:
            return RouteDecision(route, relevant.relevance, relevant.confidence, True, relevant.reason)
        started = time.perf_counter()
        # The design's source decision reads the message alone (source_sees: question).
        seen_turns = shown if self.params.source_sees == "conversation" else []
        prompt = router_prompts.source_prompt(question, seen_turns, self.params.turn_chars)
        second = self._ask_step("source", prompt, SourceReply, seen, started, trace)
        if second is None or second.parsed is None:
            return UNUSABLE_DECISION
        source = second.parsed
        decision = RouteDecision(source.route, "no", source.confidence, True, source.reason)
        trace.add(self.judgement(seen, {"step": "source", **self._record(decision, method="llm")}, second,
                                 started=started))
        return decision

    def _ask_step(self, step: str, prompt: str, schema: type[ModelT], seen: str, started: float,
                  trace: JudgementLog) -> LLMResult[ModelT] | None:
        """One decision's call. A reply that cannot be used is recorded here, as a fallback to the
        documents route, and comes back without ``parsed`` (None when the call itself failed)."""
        base = {"step": step, **self._record(UNUSABLE_DECISION, method="llm")}
        try:
            result = self.ask(prompt, schema, system=router_prompts.SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(seen, base, None, started, str(error)))
            return None
        if result.parsed is None:
            trace.add(self.fallback(seen, base, result, started, result.parse_error))
        return result

    def _record(self, decision: RouteDecision, **extra: Any) -> dict[str, Any]:
        return {"route": decision.route, "relevance": decision.relevance, "confidence": decision.confidence,
                "reason": decision.reason, **extra, **self._read[2]}
