"""Strategy judge: pick dense, bm25 or hybrid retrieval per query, over the same index.

- ``heuristic``: a query with a quoted phrase, a code-like token (digits, inner capitals,
  underscores or hyphens: "IL-6", "ACE2", "H1N1") or at most 3 words is a lexical lookup -> bm25
  (confidence 0.9 for a quote or code, 0.7 for a short query); a natural-language question of 8
  words or more without such tokens -> dense (0.7); anything between -> hybrid (0.5). A strategy
  outside ``strategies`` gives way to the first listed, with confidence 0.3.
- ``llm``: the model answers ``{strategy, confidence, reason}``; a reply that cannot be used
  keeps the run's own retriever (returns None), recorded invalid.

With a profile from the profile judge (``ragkit.stages.query.profile``), the first rule that holds:
a quoted phrase or code-like token -> bm25 (0.9, as above); an exploratory (or the design's
conceptual) question -> dense (0.7); a technical corpus -> bm25 for a short query (0.7), else
hybrid (0.6); a comparison (comparative) or a complex question -> hybrid (0.6); otherwise the
rules above. The llm prompt gets the profile as one
line. Without a profile (the profile judge off, or its reply unusable) the judge decides exactly as
it did before the profile existed, prompt included; with one, the judgement records it.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.query.params import Strategy, StrategyJudgeInfo, StrategyParams
from ragkit.text import CODE_LIKE

if TYPE_CHECKING:
    from ragkit.stages.query.profile import QueryProfile

_QUOTED = re.compile(r"[\"“][^\"”]+[\"”]")


class StrategyReply(BaseModel):
    strategy: Strategy
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


SYSTEM = "You choose a search strategy for a query. Reply with one JSON object only."

EXAMPLE = (
    "Strategies: dense (meaning), bm25 (exact words, names, codes), hybrid (both).\n"
    "Example:\nQuery: IL-6 levels\n"
    '{"strategy": "bm25", "confidence": 0.8, "reason": "a code-like term"}'
)


def heuristic_choice(query: str) -> tuple[str, float, str]:
    words = query.split()
    if _QUOTED.search(query):
        return "bm25", 0.9, "a quoted phrase"
    if CODE_LIKE.search(query):
        return "bm25", 0.9, "a code-like token"
    if len(words) <= 3:
        return "bm25", 0.7, "a short keyword query"
    if len(words) >= 8:
        return "dense", 0.7, "a long natural-language question"
    return "hybrid", 0.5, "neither clearly lexical nor clearly semantic"


def profiled_choice(query: str, profile: QueryProfile) -> tuple[str, float, str]:
    """The heuristic with the profile judge's view of the query and the documents (module docstring)."""
    if _QUOTED.search(query) or CODE_LIKE.search(query):
        return heuristic_choice(query)
    if profile.intent in ("exploratory", "conceptual"):
        article = "an" if profile.intent == "exploratory" else "a"
        return "dense", 0.7, f"{article} {profile.intent} question: meaning over exact words"
    if profile.technical:
        if len(query.split()) <= 3:
            return "bm25", 0.7, "a short query over technical documents"
        return "hybrid", 0.6, "technical documents: exact terms and meaning both count"
    if profile.intent in ("comparison", "comparative") or profile.complexity == "complex":
        kind = "comparison" if profile.intent in ("comparison", "comparative") else "complex question"
        return "hybrid", 0.6, f"a {kind}: exact names and meaning both count"
    return heuristic_choice(query)


class StrategyJudge(StrategyJudgeInfo, Stage):
    params: StrategyParams

    def __init__(self, params: StrategyParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def choose(self, query: str, trace: JudgementLog, profile: QueryProfile | None = None) -> str | None:
        """The strategy for ``query``; None (keep the run's own retriever) when off or on a bad reply.
        ``profile``: the profile judge's, when it ran and could profile the query."""
        if not self.enabled:
            return None
        started = time.perf_counter()
        allowed = list(self.params.strategies)
        # Recorded only when given, so a run without the profile judge records no profile key.
        read = {"profile": profile.record()} if profile is not None else {}
        if self.params.mode == "heuristic":
            strategy, confidence, reason = heuristic_choice(query) if profile is None else \
                profiled_choice(query, profile)
            if strategy not in allowed:
                strategy, confidence, reason = allowed[0], 0.3, f"{reason}, but {strategy} is not allowed"
            trace.add(self.judgement(query, {"strategy": strategy, "confidence": confidence, "reason": reason,
                                             **read}, started=started))
            return strategy
        profile_line = f"{profile.describe()}\n" if profile is not None else ""
        prompt = f"{EXAMPLE}\n\n{profile_line}Allowed: {', '.join(allowed)}\nQuery: {' '.join(query.split())}\n" \
                 "Reply as JSON with strategy, confidence and reason."
        try:
            result = self.ask(prompt, StrategyReply, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            trace.add(self.fallback(query, read, None, started, str(error)))
            return None
        reply = result.parsed
        if reply is None or reply.strategy not in allowed:
            problem = None if reply is None else f"strategy '{reply.strategy}' is not allowed ({', '.join(allowed)})"
            trace.add(self.fallback(query, read, result, started, problem))
            return None
        trace.add(self.judgement(query, {"strategy": reply.strategy, "confidence": reply.confidence,
                                         "reason": reply.reason, **read}, result, started=started))
        return reply.strategy
