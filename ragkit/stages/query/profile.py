"""Profile judge: the query's intent and complexity beside the corpus' document profile, for the
strategy judge to read.

The document profile (each document's type, technical density and domain tags, and the corpus'
made of them) is written once per corpus and method (``ragkit.corpus.profile``) and handed to the
judge when the run's pipeline is built; per question the judge adds the query's side:

- ``heuristic``, the first rule that holds, on the query's lower-cased words:
  intent: comparison (compare, versus, vs, difference, differ, "between ... and ...", better,
  worse, similar) -> procedural ("how to", "how do/can/should I/you/we", step(s), procedure,
  protocol, instructions) -> exploratory (explain, describe, overview, "tell me about", why,
  implications, role of, impact of, discuss, summarise) -> factual;
  complexity: complex for a comparison, ``complex_words`` content words or more, or two joints
  (and / or / as well as / a comma or semicolon); simple for at most ``simple_words`` content
  words and no joint; moderate otherwise.
- ``llm``: the model reads the query and one line on the documents and answers ``{intent,
  complexity, reason}``; a reply that cannot be used gives no profile (the strategy judge then
  decides as without this judge), recorded invalid.

``documents`` says how the document profiles are written: as the mode (llm: one call per document,
once per corpus and model) or always by rule. ``technical_density`` is where the corpus counts as
technical (its mean density, 0-1; code or tables are technical whatever their density).

``taxonomy: design`` uses the agentic design's vocabulary on both sides: its 29 document types
(``ragkit.corpus.profile_design``; an API reference or a technical specification is then what
code and tables are) and its intents factual, conceptual, comparative, procedural, by its rules in
heuristic mode (``ragkit.stages.query.design_intents``) or named in the llm prompt.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from ragkit.corpus.profile import CorpusProfile
from ragkit.corpus.profile_design import DESIGN_TECHNICAL_TYPES
from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.query.design_intents import design_complexity, design_intent
from ragkit.stages.query.params import ProfileJudgeInfo, ProfileParams
from ragkit.text import content_words

# The basic intents, then the design's two others (taxonomy: design).
Intent = Literal["factual", "comparison", "procedural", "exploratory", "conceptual", "comparative"]
Complexity = Literal["simple", "moderate", "complex"]
INTENTS: tuple[Intent, ...] = ("factual", "comparison", "procedural", "exploratory")
TECHNICAL_TYPES = ("code", "table")

_COMPARISON = re.compile(r"\b(?:compar\w*|versus|vs|differ\w*|contrast\w*|better|worse|similar\w*)\b"
                         r"|\bbetween\b.+\band\b")
_PROCEDURAL = re.compile(r"\bhow (?:to|(?:do|can|should|would) (?:i|you|we))\b"
                         r"|\b(?:steps?|procedures?|protocols?|instructions?)\b")
_EXPLORATORY = re.compile(r"\b(?:explain\w*|describe\w*|overview|tell me about|why|implications?|role of|"
                          r"impacts? of|discuss\w*|summari[sz]e\w*)\b")
_JOINTS = re.compile(r"\b(?:and|or|as well as)\b|[,;]")


@dataclass(frozen=True)
class CorpusSide:
    """What the strategy judge reads of the document profiles."""

    dominant_type: str | None
    technical_density: float
    technical: bool
    domain_tags: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        return {"dominant_type": self.dominant_type, "technical_density": self.technical_density,
                "technical": self.technical, "domain_tags": list(self.domain_tags)}

    def describe(self) -> str:
        """One line for a prompt."""
        return (f"Documents: mostly {self.dominant_type or 'unknown'}, technical density "
                f"{self.technical_density:.2f} ({'high' if self.technical else 'low'}); topics: "
                f"{', '.join(self.domain_tags) or 'none'}.")


@dataclass(frozen=True)
class QueryProfile:
    """What the strategy judge reads: the query's intent and complexity, the corpus' side."""

    intent: Intent
    complexity: Complexity
    corpus: CorpusSide

    @property
    def technical(self) -> bool:
        return self.corpus.technical

    def record(self) -> dict[str, Any]:
        return {"intent": self.intent, "complexity": self.complexity, **self.corpus.record()}

    def describe(self) -> str:
        """One line for a prompt."""
        return f"Query intent: {self.intent}; complexity: {self.complexity}. {self.corpus.describe()}"


class QueryProfileReply(BaseModel):
    intent: Literal["factual", "comparison", "procedural", "exploratory"]
    complexity: Complexity
    reason: str = ""


class DesignQueryProfileReply(BaseModel):
    intent: Literal["factual", "conceptual", "comparative", "procedural"]
    complexity: Complexity
    reason: str = ""


SYSTEM = "You classify a search query. Reply with one JSON object only."

EXAMPLE = (
    "Intents: factual (one fact), comparison (two or more things side by side), procedural (how to do "
    "something), exploratory (an open question about a topic). Complexity: simple, moderate or complex.\n"
    "Example:\nQuery: Which heats a house more cheaply, a heat pump or a gas boiler?\n"
    '{"intent": "comparison", "complexity": "moderate", "reason": "two heating systems side by side"}'
)

DESIGN_EXAMPLE = (
    "Intents: factual (specific facts or definitions), conceptual (understanding a concept, an explanation), "
    "comparative (comparing options), procedural (how to do something, step by step). Complexity: simple, "
    "moderate or complex.\n"
    "Example:\nQuery: Which heats a house more cheaply, a heat pump or a gas boiler?\n"
    '{"intent": "comparative", "complexity": "moderate", "reason": "two heating systems side by side"}'
)


def heuristic_intent(query: str) -> Intent:
    text = " ".join(query.lower().split())
    for intent, rule in (("comparison", _COMPARISON), ("procedural", _PROCEDURAL), ("exploratory", _EXPLORATORY)):
        if rule.search(text):
            return intent  # type: ignore[return-value]
    return "factual"


def heuristic_complexity(query: str, intent: Intent, simple_words: int = 3, complex_words: int = 8) -> Complexity:
    count = len(dict.fromkeys(content_words(query)))
    joints = len(_JOINTS.findall(query.lower()))
    if intent == "comparison" or count >= complex_words or joints >= 2:
        return "complex"
    if count <= simple_words and joints == 0:
        return "simple"
    return "moderate"


class ProfileJudge(ProfileJudgeInfo, Stage):
    params: ProfileParams

    def __init__(self, params: ProfileParams, llm: Any = None, *, document_profiles: CorpusProfile | None = None,
                 **_dependencies: Any) -> None:
        super().__init__(params, llm)
        self.documents = document_profiles

    def corpus_side(self) -> CorpusSide:
        """The corpus' part of every profile (nothing known without document profiles)."""
        documents = self.documents
        if documents is None or not documents.documents:
            return CorpusSide(None, 0.0, False, ())
        density = documents.technical_density()
        dominant = documents.dominant_type()
        technical_types = DESIGN_TECHNICAL_TYPES if self.params.taxonomy == "design" else TECHNICAL_TYPES
        return CorpusSide(dominant, density, density >= self.params.technical_density or dominant in technical_types,
                          tuple(documents.domain_tags()))

    def chunk_metadata(self) -> dict[str, dict[str, Any]]:
        """doc id -> the profile fields each of its chunks carries with ``on_chunks`` (none when
        off, without it, or without document profiles)."""
        if not self.enabled or not self.params.on_chunks or self.documents is None:
            return {}
        return self.documents.chunk_metadata()

    def _documents_record(self) -> dict[str, Any]:
        documents = self.documents
        if documents is None:
            return {"documents": 0}
        return {"documents": len(documents.documents), "document_types": documents.types(),
                "document_method": documents.method, "invalid_documents": documents.invalid()}

    def profile(self, query: str, trace: JudgementLog) -> QueryProfile | None:
        """The query's profile; None (the strategy judge decides without one) when off or on a bad reply."""
        if not self.enabled:
            return None
        started = time.perf_counter()
        corpus = self.corpus_side()
        design = self.params.taxonomy == "design"
        if self.params.mode == "heuristic":
            intent: Intent = design_intent(query) if design else heuristic_intent(query)
            complexity = design_complexity(query, intent) if design else \
                heuristic_complexity(query, intent, self.params.simple_words, self.params.complex_words)
            profile = QueryProfile(intent, complexity, corpus)
            trace.add(self.judgement(query, {**profile.record(), **self._documents_record()}, started=started))
            return profile
        prompt = (f"{DESIGN_EXAMPLE if design else EXAMPLE}\n\n{corpus.describe()}\nQuery: {' '.join(query.split())}\n"
                  "Reply as JSON with intent, complexity and reason.")
        schema: type[QueryProfileReply | DesignQueryProfileReply] = \
            DesignQueryProfileReply if design else QueryProfileReply
        try:
            result = self.ask(prompt, schema, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(query, self._documents_record(), None, started, str(error)))
            return None
        reply = result.parsed
        if reply is None:
            trace.add(self.fallback(query, self._documents_record(), result, started, None))
            return None
        profile = QueryProfile(reply.intent, reply.complexity, corpus)
        trace.add(self.judgement(query, {**profile.record(), "reason": reply.reason, **self._documents_record()},
                                 result, started=started))
        return profile
