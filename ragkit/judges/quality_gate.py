"""Quality gate (self-RAG): judge whether the retrieved chunks suffice; if not, reformulate and retry.

Each round assesses the latest attempt. ``heuristic`` mode calls an attempt sufficient when its
top score reaches ``min_top_score`` and the mean of its top ``score_top_k`` scores reaches
``min_mean_score``; its reformulation is the question's keywords plus the most frequent new
words of the best attempt's top chunks (pseudo-relevance feedback). ``llm`` mode asks the model
for ``{sufficient, reformulated_query, reason}``. Rounds stop when an attempt is sufficient,
when no new query comes up, or after ``max_retries`` re-retrievals.

The gate then returns the best attempt: the highest mean of the top ``score_top_k`` scores
(an empty attempt scores -inf), the earliest attempt on a tie, so the original retrieval wins
unless a retry did strictly better. A verdict that cannot be parsed falls back to the original
retrieval, the judge-off behaviour.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, Field

from ragkit.judges.base import Judge, JudgeParams, JudgeTrace
from ragkit.judges.retrieval import numbered_chunks
from ragkit.llms.base import LLMError

Retrieve = Callable[[str], list[NodeWithScore]]

_WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    "a an and are as at be by can did do does for from had has have how i in is it its of on or that the "
    "their there these this to was were what when where which who whom whose why will with would you".split()
)


class QualityGateParams(JudgeParams):
    max_retries: int = Field(default=2, ge=1, le=5, description="Most re-retrievals with a reformulated query.")
    score_top_k: int = Field(
        default=5, ge=1, le=100, description="The mean of this many top scores ranks attempts (and feeds the rule)."
    )
    min_top_score: float = Field(
        default=0.5, ge=-1000.0, le=1000.0,
        description="heuristic: the best chunk must score at least this (the retriever's scale).",
    )
    min_mean_score: float = Field(
        default=0.3, ge=-1000.0, le=1000.0,
        description="heuristic: the mean of the top score_top_k scores must reach this.",
    )
    expansion_terms: int = Field(
        default=3, ge=1, le=20, description="heuristic: words from the best chunks added per reformulation."
    )
    max_chunks: int = Field(default=4, ge=1, le=20, description="llm: chunks shown to the model.")
    chunk_chars: int = Field(
        default=250, ge=40, le=4000, description="llm: characters of each chunk shown (small context)."
    )
    max_tokens: int = Field(default=96, ge=16, le=2048, description="llm: most tokens in one reply.")


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


def build_prompt(query: str, nodes: list[NodeWithScore], chunk_chars: int, tried: list[str]) -> str:
    """``tried``: the reformulations already searched, so the model proposes a new one."""
    searched = f"Already searched: {'; '.join(tried)}\n" if tried else ""
    return (
        f"{EXAMPLE}\n\nQuestion: {query}\n{searched}{numbered_chunks(nodes, chunk_chars) or '(no chunks)'}\n"
        "Can these chunks answer the question? Reply as JSON with sufficient, reformulated_query and reason."
    )


@dataclass
class Attempt:
    query: str
    nodes: list[NodeWithScore]
    mean_score: float


def mean_top_score(nodes: list[NodeWithScore], k: int) -> float:
    """Mean of the ``k`` highest scores (missing scores count as 0); -inf with no nodes."""
    scores = sorted((float(node.score or 0.0) for node in nodes), reverse=True)[:k]
    return sum(scores) / len(scores) if scores else float("-inf")


def best_attempt(attempts: list[Attempt]) -> int:
    """Index of the highest mean score; the earliest on a tie."""
    return max(range(len(attempts)), key=lambda index: (attempts[index].mean_score, -index))


def keywords(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


def _normal(query: str) -> str:
    return " ".join(query.lower().split())


class QualityGate(Judge):
    name: ClassVar[str] = "quality_gate"
    Params: ClassVar[type[QualityGateParams]] = QualityGateParams
    params: QualityGateParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")

    def __init__(self, params: QualityGateParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def run(self, query: str, retrieve: Retrieve, trace: JudgeTrace) -> list[NodeWithScore]:
        """The chunks of the best attempt; exactly ``retrieve(query)`` when off or on an unusable verdict."""
        first = retrieve(query)
        if not self.enabled:
            return first
        k = self.params.score_top_k
        attempts = [Attempt(query, first, mean_top_score(first, k))]
        tried = {_normal(query)}
        stopped = "max_retries"
        for round_number in range(1, self.params.max_retries + 1):
            started = time.perf_counter()
            latest = attempts[-1]
            summary = f"round {round_number}: {latest.query} | {len(latest.nodes)} chunks"
            decision: dict[str, Any] = {"round": round_number, "query": latest.query,
                                        "mean_score": _finite(latest.mean_score)}
            if self.params.mode == "heuristic":
                sufficient, new_query, reason = self._heuristic_verdict(query, latest, attempts)
                result = None
            else:
                prompt = build_prompt(query, latest.nodes[: self.params.max_chunks], self.params.chunk_chars,
                                      [attempt.query for attempt in attempts[1:]])
                try:
                    result = self.ask(prompt, GateVerdict, system=SYSTEM, max_tokens=self.params.max_tokens)
                except LLMError as error:
                    trace.add(self.judgement(summary, {**decision, "action": "fell back"}, started=started,
                                             fell_back=True, error=str(error)))
                    return first
                if result.parsed is None:
                    trace.add(self.judgement(summary, {**decision, "action": "fell back"}, result,
                                             started=started, fell_back=True))
                    return first
                verdict = result.parsed
                new_query = " ".join(verdict.reformulated_query.split())
                sufficient, reason = verdict.sufficient, verdict.reason
            decision.update(sufficient=sufficient, reformulated_query=new_query, reason=reason)

            if sufficient:
                stopped = "sufficient"
            elif not new_query or _normal(new_query) in tried:
                stopped = "no new query"
            else:
                tried.add(_normal(new_query))
                nodes = retrieve(new_query)
                attempts.append(Attempt(new_query, nodes, mean_top_score(nodes, k)))
                decision.update(action="retry", retry_mean_score=_finite(attempts[-1].mean_score))
            trace.add(self.judgement(summary, decision, result, started=started))
            if decision.get("action") != "retry":
                break

        chosen = best_attempt(attempts)
        trace.judgements[-1].decision.update(
            stopped=stopped, chosen_attempt=chosen, chosen_query=attempts[chosen].query,
            attempts=[{"query": a.query, "mean_score": _finite(a.mean_score)} for a in attempts],
            kept=[node.node.node_id for node in attempts[chosen].nodes],
        )
        return attempts[chosen].nodes

    def _heuristic_verdict(self, query: str, latest: Attempt, attempts: list[Attempt]) -> tuple[bool, str, str]:
        nodes = latest.nodes
        top = max((float(node.score or 0.0) for node in nodes), default=float("-inf"))
        problems = []
        if top < self.params.min_top_score:
            problems.append(f"top score {_finite(top)} < {self.params.min_top_score}")
        if latest.mean_score < self.params.min_mean_score:
            problems.append(f"mean top-{self.params.score_top_k} score {_finite(latest.mean_score)} "
                            f"< {self.params.min_mean_score}")
        if not problems:
            return True, "", "scores pass both thresholds"
        return False, self._expanded_query(query, attempts, len(attempts)), "; ".join(problems)

    def _expanded_query(self, query: str, attempts: list[Attempt], round_number: int) -> str:
        """The question's keywords plus ``expansion_terms`` x round frequent new words of the best chunks."""
        base = keywords(query)
        best = attempts[best_attempt(attempts)].nodes[: self.params.score_top_k]
        counts = Counter(word for node in best for word in keywords(node.node.get_content())
                         if word not in base and len(word) > 2)
        extra = [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
        return " ".join(base + extra[: self.params.expansion_terms * round_number])


def _finite(value: float) -> float | None:
    """JSON-safe score: None instead of -inf (an empty attempt)."""
    return None if value == float("-inf") else round(value, 6)
