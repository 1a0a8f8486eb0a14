"""One question as the stages after retrieval see it, and what a loop over its answers may do.

``QuestionContext`` is what every step of one question shares: the question, the query retrieval
uses (the condensed follow-up; the question itself without history), the conversation before it
and the log its decisions go to. ``AnswerActions`` are the steps a loop that improves an answer
(hallucination correction, the answer check's late tier) may take, given by the pipeline so that
each is timed as a step of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragkit.stages.base import JudgementLog

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from ragkit.stages.answer.generator import Answer
    from ragkit.stages.prompts import ConversationTurn


@dataclass(frozen=True)
class QuestionContext:
    """``query`` is what retrieval searches for; a retry may search for another query, but the
    question, its history and its log stay."""

    question: str
    query: str
    history: Sequence[ConversationTurn] = ()
    log: JudgementLog = field(default_factory=JudgementLog)


@dataclass(frozen=True)
class AnswerActions:
    """``regenerate(nodes, feedback)``: a new answer from ``nodes``, the prompt listing ``feedback``;
    ``re_retrieve(query)``: the chunks of a new search, None when the chunks cannot be searched
    again (web results); ``switch(strategy)``: change the strategy of the next ``re_retrieve``,
    None without a switchable retriever; ``strategy``: the one in use when the loop starts."""

    regenerate: Callable[[list[NodeWithScore], list[str]], Answer]
    re_retrieve: Callable[[str], list[NodeWithScore]] | None = None
    switch: Callable[[str], None] | None = None
    strategy: str | None = None
