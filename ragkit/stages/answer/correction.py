"""Hallucination correction: act on a failed groundedness check, then keep the best attempt.

After the groundedness judge scored an answer (its supported share of claims), one tier applies:

- share >= ``accept_at`` (0.8): accept, nothing more is done;
- share >= ``regenerate_at`` (0.6): regenerate, the prompt listing the unsupported claims;
- below that, or a retrieval quality below ``min_retrieval_quality`` (0.6; known when a quality
  gate scored the retrieval): with ``on_fail: re_retrieve`` retrieve again with a refined query,
  then regenerate from the new chunks; with ``on_fail: regenerate`` regenerate only.

Each correction is checked again and the loop goes on until an attempt is accepted, a check
gives no score, or ``max_corrections`` rounds are done. An answer without a score (no claim could
be checked) is not corrected: there is no diagnosis to act on. The best attempt is kept: the
highest score, the earliest on a tie, and a missing score ranks below any number, so a
correction must do strictly better to replace the first answer.

The tiers are the design's: proceed at or above the upper threshold (``accept_at``), regenerate
in the middle band, re-retrieve below the lower one (``regenerate_at``). ``re_retrieve_strategy``
(``ragkit.stages.answer.retry_strategy``) makes that re-retrieval search with a changed strategy
(``next``: dense -> bm25 -> hybrid -> dense, the design's rotation) through the ``switch``
callable the pipeline gives; ``same`` (the default) searches with the strategy in use.

The refined query is a rule, not a model call, so it is the same across runs and costs nothing:
the query plus the content words of the unsupported claims that the query lacks, in the order
they first appear. The claims say what the answer wanted to state; searching for their words
finds the passages that would support or refute them.

The steps (``AnswerActions``: regenerate, re-retrieve, switch; and the check) are given by the
pipeline, which times each as its own stage; every round is one judgement of judge
``correction`` in the question's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.schema import NodeWithScore

from ragkit.stages.answer.generator import Answer
from ragkit.stages.answer.groundedness import GroundednessParams, unsupported_claims
from ragkit.stages.answer.retry_strategy import retry_strategy
from ragkit.stages.base import Judgement
from ragkit.stages.question import AnswerActions, QuestionContext
from ragkit.text import with_new_keywords

JUDGE = "correction"
ACCEPT, REGENERATE, RE_RETRIEVE = "accept", "regenerate", "re_retrieve"

Check = Callable[[Answer, list[NodeWithScore]], tuple[float | None, Judgement | None]]


@dataclass
class CorrectionAttempt:
    answer: Answer
    nodes: list[NodeWithScore]
    score: float | None
    judgement: Judgement | None


@dataclass
class CorrectionResult:
    answer: Answer
    nodes: list[NodeWithScore]
    score: float | None
    judgement: Judgement | None
    kept: int
    attempts: list[dict[str, Any]] = field(default_factory=list)


def refined_query(query: str, claims: list[str]) -> str:
    """The query plus the claims' content words it lacks (3 letters or more), each once, in order."""
    return with_new_keywords(query, claims, min_length=3)


def best_attempt(attempts: list[CorrectionAttempt]) -> int:
    """The highest score, the earliest on a tie; None ranks below every score."""
    return max(range(len(attempts)),
               key=lambda i: (attempts[i].score is not None, attempts[i].score or 0.0, -i))


class HallucinationCorrector:
    def __init__(self, params: GroundednessParams) -> None:
        self.params = params

    def tier(self, score: float | None, retrieval_quality: float | None) -> str:
        """Which correction ``score`` calls for (accept when there is no score to act on)."""
        p = self.params
        if score is None or p.on_fail == "off" or score >= p.accept_at:
            return ACCEPT
        poor_retrieval = retrieval_quality is not None and retrieval_quality < p.min_retrieval_quality
        if p.on_fail == RE_RETRIEVE and (score < p.regenerate_at or poor_retrieval):
            return RE_RETRIEVE
        return REGENERATE

    def run(self, context: QuestionContext, first: CorrectionAttempt, actions: AnswerActions, check: Check,
            retrieval_quality: float | None) -> CorrectionResult:
        """Correct ``first`` for ``context.query``, recording each round in ``context.log``.
        ``actions.re_retrieve`` None: the chunks cannot be searched again (web results), so the
        lower tier regenerates. Only the first attempt's retrieval quality is known; a
        re-retrieval has no gate score, so later rounds decide by the groundedness score alone."""
        query, trace, re_retrieve = context.query, context.log, actions.re_retrieve
        attempts = [first]
        quality = retrieval_quality
        current = actions.strategy
        for round_number in range(1, self.params.max_corrections + 1):
            latest = attempts[-1]
            tier = self.tier(latest.score, quality)
            if tier == RE_RETRIEVE and re_retrieve is None:
                tier = REGENERATE
            if tier == ACCEPT:
                break
            started = time.perf_counter()
            claims = unsupported_claims(latest.judgement)
            decision: dict[str, Any] = {"round": round_number, "tier": tier, "score_before": latest.score,
                                        "unsupported": claims}
            nodes = latest.nodes
            if tier == RE_RETRIEVE and re_retrieve is not None:  # else the tier became REGENERATE above
                decision["refined_query"] = refined_query(query, claims)
                current = self._switch(decision, actions.switch, current)
                nodes = re_retrieve(decision["refined_query"])
                decision["retrieved"] = [node.node.node_id for node in nodes]
            answer = actions.regenerate(nodes, claims)
            # An empty or abstained answer ("not found") has no claims to check, so it gets no score.
            score, judgement = check(answer, nodes) if answer.text and not answer.abstained else (None, None)
            attempts.append(CorrectionAttempt(answer, nodes, score, judgement))
            decision["score_after"] = score
            trace.add(Judgement(JUDGE, f"{query} | round {round_number}: {tier}"[:500], decision,
                                seconds=time.perf_counter() - started))
            quality = None
            if score is None:
                break
        kept = best_attempt(attempts)
        summary = [{"score": attempt.score, "chunks": len(attempt.nodes)} for attempt in attempts]
        if len(attempts) > 1:
            trace.judgements[-1].decision.update(kept=kept, attempts=summary)
        chosen = attempts[kept]
        return CorrectionResult(chosen.answer, chosen.nodes, chosen.score, chosen.judgement, kept, summary)

    def _switch(self, decision: dict[str, Any], switch: Callable[[str], None] | None,
                current: str | None) -> str | None:
        """Switch to the re-retrieval's strategy (recorded in ``decision``); the strategy now in use."""
        choice = self.params.re_retrieve_strategy
        if choice == "same":
            return current
        target = retry_strategy(choice, current)
        if switch is None or target is None:
            decision["strategy"] = None
            decision["strategy_note"] = ("no strategy to switch between in this pipeline" if switch is None
                                         else f"strategy in use unknown: '{choice}' has nothing to move from")
            return current
        switch(target)
        decision.update(strategy_before=current, strategy=target)
        return target
