"""The two-decision router's prompts and reply shapes (``RouterParams.decisions: two``).

The design routes in two questions to the model rather than one: first relevance (do the
documents cover the message?), and only when they do not, the source (is it conversation that
needs no sources, or does it need the web?). Each prompt asks one thing with its own examples,
which a small model answers more reliably than the combined route-and-relevance reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from ragkit.stages.prompts import ConversationTurn

SYSTEM = "You help route a user's message to the right source of answers. Reply with one JSON object only."


class RelevanceReply(BaseModel):
    relevance: Literal["yes", "no", "maybe"] = Field(description="Do the documents cover the message.")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="How sure, 0 to 1.")
    reason: str = ""


class SourceReply(BaseModel):
    route: Literal["conversational", "web"] = Field(description="conversational or web.")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="How sure, 0 to 1.")
    reason: str = ""


RELEVANCE_EXAMPLES = (
    "Examples:\n"
    "Documents: Recipes for breads and cakes; baking times, flour, yeast.\n"
    "Message: How long should sourdough rise?\n"
    '{"relevance": "yes", "confidence": 0.9, "reason": "bread recipes cover rising"}\n'
    "Message: Who won the football match last night?\n"
    '{"relevance": "no", "confidence": 0.8, "reason": "sports news, not baking"}\n'
    "Message: Thanks, that helped!\n"
    '{"relevance": "no", "confidence": 0.9, "reason": "thanks, nothing to look up"}'
)

SOURCE_EXAMPLES = (
    "Examples:\n"
    "Message: Thanks, that helped!\n"
    '{"route": "conversational", "confidence": 0.9, "reason": "thanks, no question"}\n'
    "Message: Who won the football match last night?\n"
    '{"route": "web", "confidence": 0.8, "reason": "needs recent news"}'
)


def conversation_block(history: Sequence[ConversationTurn], turn_chars: int) -> str:
    """``history``: the turns to show, already cut to the most recent ones ('' for none)."""
    if not history:
        return ""
    lines = [f"{turn.role}: {' '.join(turn.content.split())[:turn_chars]}" for turn in history]
    return "Conversation so far:\n" + "\n".join(lines) + "\n"


def relevance_prompt(question: str, summary: str, history: Sequence[ConversationTurn], turn_chars: int) -> str:
    return (
        f"{RELEVANCE_EXAMPLES}\n\nDocuments: {summary or '(no description)'}\n"
        f"{conversation_block(history, turn_chars)}Message: {question}\n"
        "Is the message about the documents? relevance: yes if the documents can answer it, maybe if they "
        "might, no if it is off their topic or needs no sources. Reply as JSON with relevance, confidence "
        "(0 to 1) and reason."
    )


def source_prompt(question: str, history: Sequence[ConversationTurn], turn_chars: int) -> str:
    return (
        f"{SOURCE_EXAMPLES}\n\n{conversation_block(history, turn_chars)}Message: {question}\n"
        "The documents do not cover this message. route: conversational for greetings, thanks or small talk "
        "that needs no sources, web if it asks for information. Reply as JSON with route, confidence (0 to 1) "
        "and reason."
    )
