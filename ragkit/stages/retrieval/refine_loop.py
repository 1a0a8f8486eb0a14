"""The Retrieval Judge's iterative loop (``loop: evaluate_refine``), the judges design's phase 4:
retrieve -> evaluate -> refine -> retrieve, each step its own call.

Round 1 shows the model the first ``max_chunks`` (10 in the design) of the retrieval the pipeline
made and asks one question: which chunks help, and are they enough (``{relevant, sufficient,
missing}``). When they are not enough and rounds are left, a *separate* call writes a new search
query from the question, the queries already searched and what the evaluation said is missing
(``{query}``); the retriever searches it and the next round evaluates its first ``max_chunks``
chunks that no round has shown yet. At most ``max_iterations`` evaluations, so at most
``max_iterations - 1`` refine calls.

The result is every chunk an evaluation called relevant, round by round in the order each
evaluation gave. No relevant chunk at all: ``none_relevant: keep_all`` keeps every chunk shown (the
design's rule), ``drop_all`` leaves the context empty. ``keep_unjudged`` appends the chunks never
shown. Unusable replies fall back the way the rest of the judge does: an evaluation that cannot be
read in round 1 returns the unjudged retrieval; a later one, or a refine reply that cannot be read
or is empty, ends the loop with what the earlier rounds judged. A refined query that repeats a
searched one is not searched: the loop ends with what the earlier rounds judged, recorded as a
valid judgement (``action: not searched``, the query it repeats and their overlap). A repeat is the
same query up to case, punctuation, word order and plurals, or a near-duplicate: the Jaccard
overlap of the two queries' content words (``ragkit.text.content_words``, plurals folded) is
``REPEAT_OVERLAP`` (0.8) or more: "decibels of a cat's purr" repeats "cat purr decibel" (the same
words), "cat purr loudness" after "cat purr decibels" (2 of 4) is new. Every call is a judgement of
its own (``decision["call"]``: evaluate or refine).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.prompts import numbered_chunks, source_label
from ragkit.stages.retrieval.params import RetrievalJudgeParams
from ragkit.text import content_words, word_stem, words

if TYPE_CHECKING:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore


class EvaluateReply(BaseModel):
    relevant: list[int] = Field(description="Numbers of the chunks that help answer the question.")
    sufficient: bool = Field(description="True if the relevant chunks are enough to answer.")
    missing: str = Field(default="", description="What the chunks do not cover, if they are not enough.")


class RefineReply(BaseModel):
    query: str = Field(description="A new search query that would find what is missing.")


# A refined query whose content words overlap a searched query's this much (Jaccard) repeats it.
REPEAT_OVERLAP = 0.8

EVALUATE_SYSTEM = "You judge search results for a question. Reply with one JSON object only."
REFINE_SYSTEM = "You write search queries. Reply with one JSON object only."

EVALUATE_EXAMPLE = (
    "Example:\n"
    "Question: Why do cats purr and how loud is it?\n"
    "[1] Stocks fell after the rate rise.\n"
    "[2] Cats purr when they are content.\n"
    '{"relevant": [2], "sufficient": false, "missing": "how loud purring is"}'
)
REFINE_EXAMPLE = (
    "Example:\n"
    "Question: Why do cats purr and how loud is it?\n"
    "Searched: why do cats purr\n"
    "Missing: how loud purring is\n"
    '{"query": "cat purr loudness decibels"}'
)


def evaluate_prompt(question: str, nodes: list[NodeWithScore], chunk_chars: int, conversation: str = "",
                    show_file_name: bool = False) -> str:
    chunks = numbered_chunks(nodes, chunk_chars, label=source_label if show_file_name else None)
    return (
        f"{EVALUATE_EXAMPLE}\n\n{conversation}Question: {question}\n{chunks}\n"
        "Which chunks help answer the question, and are they enough? Reply as JSON with relevant (chunk numbers), "
        "sufficient (true or false) and missing (what is not covered)."
    )


def refine_prompt(question: str, searched: Sequence[str], missing: str, conversation: str = "") -> str:
    return (
        f"{REFINE_EXAMPLE}\n\n{conversation}Question: {question}\nSearched: {'; '.join(searched)}\n"
        f"Missing: {missing or 'more relevant passages'}\n"
        "Write one new search query (a few keywords, not one already searched) that would find what is missing. "
        "Reply as JSON with query."
    )


def _ids(nodes: Sequence[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


def evaluate_refine(judge: Stage, question: str, nodes: list[NodeWithScore], retriever: BaseRetriever,
                    trace: JudgementLog, conversation: str,
                    merge: Callable[..., list[NodeWithScore]]) -> list[NodeWithScore]:
    """The loop over ``judge``'s params; ``nodes`` is the pipeline's retrieval (round 1's search)."""
    p = cast(RetrievalJudgeParams, judge.params)  # the Retrieval Judge's (it calls this loop)
    searched = [question]
    candidates = merge(nodes)  # one copy per chunk, best first
    shown_ids: set[str] = set()
    seen: list[NodeWithScore] = list(candidates)  # every chunk retrieved, for keep_unjudged
    kept: list[NodeWithScore] = []
    every_shown: list[NodeWithScore] = []
    stopped = "max_iterations"
    for iteration in range(1, p.max_iterations + 1):
        started = time.perf_counter()
        shown = [node for node in candidates if node.node.node_id not in shown_ids][: p.max_chunks]
        decision: dict[str, Any] = {"call": "evaluate", "iteration": iteration, "query": searched[-1],
                                    "shown": _ids(shown)}
        summary = f"evaluate {iteration}: {searched[-1]} | {len(shown)} chunks"
        if not shown:
            trace.add(judge.judgement(summary, {**decision, "action": "nothing new to judge"}, started=started))
            stopped = "nothing new"
            break
        shown_ids.update(_ids(shown))
        every_shown += shown
        try:
            result = judge.ask(evaluate_prompt(question, shown, p.chunk_chars, conversation, p.show_file_name),
                               EvaluateReply, system=EVALUATE_SYSTEM, max_tokens=p.max_tokens)
            error = None
        except LLMError as call_error:
            result, error = None, str(call_error)
        reply = result.parsed if result is not None else None
        numbers = [] if reply is None else list(dict.fromkeys(n for n in reply.relevant if 1 <= n <= len(shown)))
        if reply is not None and reply.relevant and not numbers:
            error, reply = f"no chunk number in 1..{len(shown)}: relevant={reply.relevant}", None
        if reply is None:
            if iteration == 1:  # nothing judged yet: the judge-off list
                trace.add(judge.fallback(summary, decision, result, started, error))
                return list(nodes)
            trace.add(judge.fallback(summary, {**decision, "stopped": "unusable evaluation"}, result, started, error))
            every_shown = every_shown[: len(every_shown) - len(shown)]  # not judged
            stopped = "unusable evaluation"
            break
        relevant = [shown[n - 1] for n in numbers]
        kept += relevant
        decision.update(relevant=_ids(relevant), sufficient=reply.sufficient, missing=reply.missing)
        if reply.sufficient or iteration == p.max_iterations:
            stopped = "enough" if reply.sufficient else "max_iterations"
            trace.add(judge.judgement(summary, {**decision, "action": "final"}, result, started=started))
            break
        trace.add(judge.judgement(summary, {**decision, "action": "refine"}, result, started=started))
        refined, why = _refine(judge, question, searched, reply.missing, trace, conversation, iteration)
        if refined is None:
            stopped = why
            break
        searched.append(refined)
        fresh = retriever.retrieve(refined)
        seen = merge(seen, fresh)
        candidates = merge(fresh)
    final = kept
    action = f"kept {len(kept)} of {len(every_shown)} shown"
    if not kept and p.none_relevant == "keep_all":
        final, action = list(every_shown), f"none relevant: kept all {len(every_shown)} shown"
    if p.keep_unjudged:
        final_ids = set(_ids(final))
        final = final + [node for node in seen if node.node.node_id not in final_ids]
    trace.add(judge.judgement(f"loop: {question}", {"call": "result", "action": action, "stopped": stopped,
                                                    "queries": searched, "kept": _ids(final)},
                              started=time.perf_counter()))
    return final


def _terms(text: str) -> set[str]:
    return {word_stem(word) for word in content_words(text)}


def repeat_of(query: str, searched: Sequence[str]) -> tuple[str, float] | None:
    """The searched query that ``query`` repeats (module docstring) and their overlap, the closest
    first; None when it asks for something new. Queries without content words repeat only when
    their words are the same."""
    mine = _terms(query)
    best: tuple[str, float] | None = None
    for earlier in searched:
        theirs = _terms(earlier)
        if mine and theirs:
            overlap = len(mine & theirs) / len(mine | theirs)
        else:
            overlap = 1.0 if words(query) == words(earlier) else 0.0
        if overlap >= REPEAT_OVERLAP and (best is None or overlap > best[1]):
            best = (earlier, overlap)
    return best


def _refine(judge: Stage, question: str, searched: list[str], missing: str, trace: JudgementLog,
            conversation: str, iteration: int) -> tuple[str | None, str]:
    """The refine call's new query, or None and why the loop stops (recorded): its reply is unusable
    ("no new query") or repeats a searched query ("repeated query", not searched)."""
    p = cast(RetrievalJudgeParams, judge.params)  # the Retrieval Judge's (it calls this loop)
    started = time.perf_counter()
    summary = f"refine {iteration}: {question}"
    decision: dict[str, Any] = {"call": "refine", "iteration": iteration, "searched": list(searched)}
    try:
        result = judge.ask(refine_prompt(question, searched, missing, conversation), RefineReply,
                           system=REFINE_SYSTEM, max_tokens=p.max_tokens)
    except LLMError as call_error:
        trace.add(judge.fallback(summary, decision, None, started, str(call_error)))
        return None, "no new query"
    reply = result.parsed
    query = " ".join(reply.query.split()) if reply is not None else ""
    if reply is None or not query:
        trace.add(judge.fallback(summary, decision, result, started, None if reply is None else "an empty query"))
        return None, "no new query"
    if (repeat := repeat_of(query, searched)) is not None:
        earlier, overlap = repeat
        trace.add(judge.judgement(summary, {**decision, "action": "not searched", "query": query, "repeats": earlier,
                                            "overlap": round(overlap, 3)}, result, started=started))
        return None, "repeated query"
    trace.add(judge.judgement(summary, {**decision, "action": "search", "query": query}, result, started=started))
    return query, ""
