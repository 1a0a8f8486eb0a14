"""Condense: turn a follow-up question and its conversation into a standalone search query.

"What about its incubation period?" cannot be searched alone; with the conversation before it
("Tell me about MERS") it can. A question without history is returned as it is, with no call
and nothing recorded, so a question set without conversations runs as if condense were off.

- ``llm``: the model rewrites the question, shown the last ``history_turns`` turns, as JSON
  ``{question}``; a reply that cannot be used keeps the question, recorded invalid.
- ``heuristic``: the question followed by the content words of the latest user turn that the
  question lacks (a follow-up's missing subject is usually what the user last asked about),
  leaving out request words such as "tell me about".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.prompts import ConversationTurn, conversation_block
from ragkit.stages.query.params import CondenseJudgeInfo, CondenseParams
from ragkit.text import with_new_keywords


class CondenseReply(BaseModel):
    question: str = Field(description="The follow-up rewritten as a question that stands on its own.")


SYSTEM = "You rewrite a follow-up question so it can be understood without the conversation. Reply with JSON only."

EXAMPLE = (
    "Example:\n"
    "Conversation so far:\nuser: Tell me about the MERS coronavirus.\nassistant: MERS is a respiratory disease.\n"
    "Follow-up: What is its incubation period?\n"
    '{"question": "What is the incubation period of the MERS coronavirus?"}'
)


def build_prompt(question: str, conversation: str) -> str:
    return (f"{EXAMPLE}\n\n{conversation}Follow-up: {' '.join(question.split())}\n"
            "Rewrite the follow-up as a standalone question. Reply as JSON with question.")


# Words of a conversational request that name no subject ("tell me about X").
REQUEST_WORDS = frozenset("tell me about please us more know explain give show describe".split())


def heuristic_rewrite(question: str, history: Sequence[ConversationTurn]) -> str:
    """The question plus the latest user turn's content words it lacks, in their order."""
    last_user = next((turn.content for turn in reversed(list(history)) if turn.role == "user"), "")
    return with_new_keywords(question, [last_user], exclude=REQUEST_WORDS)


class CondenseJudge(CondenseJudgeInfo, Stage):
    params: CondenseParams

    def __init__(self, params: CondenseParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def rewrite(self, question: str, history: Sequence[ConversationTurn], trace: JudgementLog) -> str:
        """The standalone query; ``question`` itself when off, without history, or on a bad reply."""
        if not self.enabled or not history:
            return question
        started = time.perf_counter()
        turns = min(len(history), self.params.history_turns)
        summary = f"{question} | {turns} turns"
        if self.params.mode == "heuristic":
            standalone = heuristic_rewrite(question, history)
            trace.add(self.judgement(summary, {"standalone": standalone, "history_turns": turns}, started=started))
            return standalone
        conversation = conversation_block(history, self.params.history_turns, self.params.turn_chars)
        try:
            result = self.ask(build_prompt(question, conversation), CondenseReply, system=SYSTEM,
                              max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(summary, {"history_turns": turns}, None, started, str(error)))
            return question
        standalone = " ".join(result.parsed.question.split()) if result.parsed else ""
        if not standalone:
            problem = None if result.parsed is None else "empty question"
            trace.add(self.fallback(summary, {"history_turns": turns}, result, started, problem))
            return question
        trace.add(self.judgement(summary, {"standalone": standalone, "history_turns": turns}, result,
                                 started=started))
        return standalone
