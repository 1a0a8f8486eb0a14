"""The quality gate's issue sets: what a failed retrieval can be diagnosed as, and, for the agentic
design's set, which strategy each issue switches to and how the query rewrite fixes it.

``basic`` is the set the gate always had (``quality_gate_prompts.ISSUE_TYPES``; the heuristic
diagnoses no_coverage, partial and too_broad). ``design`` is the agentic RAG design's set: eight
types, ``none`` and seven issues, each issue with a meaning (shown to the model that diagnoses)
and rewrite guidance (what the query rewrite is told to fix).

The design's strategy map (``DESIGN_SWITCH_MAP``): an off-topic or wrong-domain result needs the
question's exact words (keyword search, bm25); a missing key fact needs its meaning (semantic,
dense). The early tier (the gate, ``switch_strategy: design``) switches only on off_topic and
wrong_domain (``EARLY_SWITCHES``) and rewrites the query for every other issue; the late tier
(``answer_check`` with ``issue_set: design``) reads the whole map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, field_validator

from ragkit.stages.prompts import numbered_chunks
from ragkit.stages.retrieval.quality_gate.prompts import ISSUE_TYPES, NO_ISSUE

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

IssueSet = Literal["basic", "design"]
ISSUE_SETS: tuple[str, ...] = ("basic", "design")


@dataclass(frozen=True)
class DesignIssue:
    meaning: str  # shown to the model that diagnoses the chunks
    guidance: str  # what the rewrite prompt tells the model to fix


DESIGN_ISSUES: dict[str, DesignIssue] = {
    "off_topic": DesignIssue(
        "about something else than the question asks",
        "Keep the question's exact subject words and drop words that led elsewhere."),
    "missing_key_info": DesignIssue(
        "on topic, but the specific fact, name, number or definition asked for is absent",
        "Add the exact key terms, names or numbers the answer must contain, so an exact-word search finds them."),
    "wrong_domain": DesignIssue(
        "about another field, or another sense of the question's words",
        "Name the field or context the question belongs to and replace ambiguous words with unambiguous ones."),
    "partial_coverage": DesignIssue(
        "answers part of the question; some aspects are missing",
        "Ask for the missing aspects explicitly, keeping the terms of the part already found."),
    "too_broad": DesignIssue(
        "general background, not specific to the question",
        "Make the query specific: keep the question's distinguishing terms and drop general words."),
    "too_narrow": DesignIssue(
        "one detail only, not what the whole question asks",
        "Use broader wording that covers the whole question."),
    "no_coverage": DesignIssue(
        "nothing in the chunks is about the question",
        "Rephrase the question's main concept with synonyms and related terms."),
}
DESIGN_ISSUE_TYPES: tuple[str, ...] = tuple(DESIGN_ISSUES)
# The design's issue-to-strategy map: keyword search for a result about the wrong thing, semantic
# search for a missing fact. Issues without an entry keep the strategy in use.
DESIGN_SWITCH_MAP: dict[str, str] = {"off_topic": "bm25", "wrong_domain": "bm25", "missing_key_info": "dense"}
# The issues on which the early tier (the gate) switches strategy; it rewrites the query on the others.
EARLY_SWITCHES: tuple[str, ...] = ("off_topic", "wrong_domain")
# Bumped when the design set's meaning changes (issues, map): part of a design gate's key, so its
# cached results are not reused for a different gate.
DESIGN_REVISION = 2
# The heuristic's diagnoses under the design's names (it cannot tell a missing key fact or a wrong domain).
HEURISTIC_TO_DESIGN = {"no_coverage": "no_coverage", "partial": "partial_coverage", "too_broad": "too_broad"}


def issue_names(issue_set: str) -> tuple[str, ...]:
    return DESIGN_ISSUE_TYPES if issue_set == "design" else ISSUE_TYPES


def normal_issue(value: Any) -> Any:
    """``Missing key-info`` -> ``missing_key_info``: a model's spelling of an issue name."""
    return value.strip().lower().replace(" ", "_").replace("-", "_") if isinstance(value, str) else value


class DesignScoredVerdict(BaseModel):
    """The scored verdict over the design's issues; ``issue`` is a closed set, so a backend that
    constrains replies to the schema can only name one of them."""

    score: int = Field(ge=0, le=100, description="0-100: how well the chunks answer the question.")
    issue: Literal["none", "off_topic", "missing_key_info", "wrong_domain", "partial_coverage", "too_broad",
                   "too_narrow", "no_coverage"] = Field(default="none",
                                                        description="none, or what is wrong with the chunks.")
    missing_aspects: list[str] = Field(default_factory=list, description="What the question asks that is missing.")
    reformulated_query: str = Field(default="", description="A better search query, if the score is low.")
    reason: str = ""

    @field_validator("issue", mode="before")
    @classmethod
    def _normal(cls, value: Any) -> Any:
        return normal_issue(value)


DESIGN_EXAMPLE = (
    "Example:\n"
    "Question: What is the boiling point of ethanol?\n"
    "[1] Ethanol is an alcohol used as a fuel and a solvent.\n"
    '{"score": 20, "issue": "missing_key_info", "missing_aspects": ["boiling point"], '
    '"reformulated_query": "ethanol boiling point degrees", "reason": "[1] does not give the boiling point"}'
)


def build_design_scored_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, tried: list[str]) -> str:
    """The scored verdict's prompt with the design's issues, each with its meaning."""
    searched = f"Already searched: {'; '.join(tried)}\n" if tried else ""
    issues = "\n".join(f"- {name}: the chunks are {issue.meaning}" for name, issue in DESIGN_ISSUES.items())
    return (
        f"{DESIGN_EXAMPLE}\n\nQuestion: {query}\n{searched}{numbered_chunks(nodes, chunk_chars) or '(no chunks)'}\n"
        f"Score 0-100 how well these chunks answer the question. Issue: {NO_ISSUE}, or the one that fits best:\n"
        f"{issues}\nReply as JSON with score, issue, missing_aspects, reformulated_query and reason."
    )


class RewriteReply(BaseModel):
    query: str = Field(description="The rewritten search query.")


REWRITE_SYSTEM = ("You rewrite a search query so that it finds what the last search missed. "
                  "Reply with one JSON object only.")

# The strategy of the retry in words (a small model echoes a bare name like "bm25" as its query).
STRATEGY_WORDS = {"dense": "a meaning-based search", "bm25": "an exact-word search",
                  "hybrid": "a search by both meaning and exact words"}


def build_rewrite_prompt(question: str, issue: str, missing: list[str], tried: list[str],
                         strategy: str | None) -> str:
    """The rewrite prompt for a diagnosed design ``issue``: its meaning and what to fix."""
    known = DESIGN_ISSUES[issue]
    lines = [
        "Example:\nQuestion: What is the boiling point of ethanol?\nProblem: missing_key_info\n"
        '{"query": "ethanol boiling point temperature degrees Celsius"}\n',
        f"Question: {question}",
        f"Problem: {issue} (the results were {known.meaning})",
        f"Fix: {known.guidance}",
    ]
    if missing:
        lines.append(f"Missing: {'; '.join(missing)}")
    if strategy in STRATEGY_WORDS:
        lines.append(f"The new query is used in {STRATEGY_WORDS[strategy]}.")
    if tried:
        lines.append(f"Already searched: {'; '.join(tried)}")
    lines.append("Write one new search query. Reply as JSON with query.")
    return "\n".join(lines)
