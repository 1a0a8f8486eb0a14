"""The quality gate's LLM verdicts: the reply models, the prompts and their few-shot examples."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, field_validator

from ragkit.stages.prompts import numbered_chunks

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

ISSUE_TYPES = ("off_topic", "too_broad", "missing_aspect", "wrong_entity", "outdated", "partial", "contradictory",
               "no_coverage")
NO_ISSUE = "none"


class ScoredVerdict(BaseModel):
    score: int = Field(ge=0, le=100, description="0-100: how well the chunks answer the question.")
    issue: str = Field(default=NO_ISSUE, description="none, or what is wrong: " + ", ".join(ISSUE_TYPES))
    missing_aspects: list[str] = Field(default_factory=list, description="What the question asks that is missing.")
    reformulated_query: str = Field(default="", description="A better search query, if the score is low.")
    reason: str = ""

    @field_validator("issue")
    @classmethod
    def _known_issue(cls, value: str) -> str:
        value = value.strip().lower().replace(" ", "_").replace("-", "_")
        if value not in (NO_ISSUE, *ISSUE_TYPES):
            raise ValueError(f"unknown issue '{value}'. Valid issues: {NO_ISSUE}, {', '.join(ISSUE_TYPES)}")
        return value


class GateVerdict(BaseModel):
    sufficient: bool = Field(description="True if the chunks are enough to answer the question.")
    reformulated_query: str = Field(default="", description="A better search query, used if not sufficient.")
    reason: str = ""


SYSTEM = "You check whether search results can answer a question. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Question: Why is the sky blue?\n"
    "[1] Stocks fell after the rate rise.\n"
    '{"sufficient": false, "reformulated_query": "sky blue color light scattering", "reason": "[1] is about stocks"}'
)


SCORED_EXAMPLE = (
    "Example:\n"
    "Question: Why is the sky blue?\n"
    "[1] Stocks fell after the rate rise.\n"
    '{"score": 5, "issue": "off_topic", "missing_aspects": ["why the sky is blue"], '
    '"reformulated_query": "sky blue color light scattering", "reason": "[1] is about stocks"}'
)


def build_scored_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, tried: list[str]) -> str:
    searched = f"Already searched: {'; '.join(tried)}\n" if tried else ""
    return (
        f"{SCORED_EXAMPLE}\n\nQuestion: {query}\n{searched}{numbered_chunks(nodes, chunk_chars) or '(no chunks)'}\n"
        f"Score 0-100 how well these chunks answer the question. Issue: none or one of {', '.join(ISSUE_TYPES)}. "
        "Reply as JSON with score, issue, missing_aspects, reformulated_query and reason."
    )


def build_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, tried: list[str]) -> str:
    """``tried``: the reformulations already searched, so the model proposes a new one."""
    searched = f"Already searched: {'; '.join(tried)}\n" if tried else ""
    return (
        f"{EXAMPLE}\n\nQuestion: {query}\n{searched}{numbered_chunks(nodes, chunk_chars) or '(no chunks)'}\n"
        "Can these chunks answer the question? Reply as JSON with sufficient, reformulated_query and reason."
    )
