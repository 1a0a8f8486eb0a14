"""Quality gate (self-RAG): judge whether the retrieved chunks suffice; if not, reformulate and retry.

Each round assesses the latest attempt. ``heuristic`` mode calls an attempt sufficient when its
top value reaches ``min_top_score`` and the mean of its top ``score_top_k`` values reaches
``min_mean_score``; its reformulation is the question's keywords plus the most frequent new
words of the best attempt's top chunks (pseudo-relevance feedback). ``llm`` mode asks the model
for ``{sufficient, reformulated_query, reason}``. Rounds stop when an attempt is sufficient,
when no new query comes up, or after ``max_retries`` re-retrievals.

The gate then returns the best attempt: the highest mean of the top ``score_top_k`` values
(an empty attempt scores -inf), the earliest attempt on a tie, so the original retrieval wins
unless a retry did strictly better. A verdict that cannot be parsed falls back to the original
retrieval, the judge-off behaviour.

Values are on one scale for every attempt (``ragkit.stages.retrieval.quality_gate.attempt_scale``):
the chunks' retriever scores while every attempt uses one strategy, and the share of the
question's keywords each chunk contains (``question_overlap``) for a gate that switches strategy,
whose attempts would otherwise compare cosines with BM25 sums and RRF fusions. The thresholds
apply to the same values.

Options added with the agentic loops (each off by default, leaving the above unchanged):

- ``verdict: scored`` (llm): the model scores the chunks 0-100 (sufficient at ``pass_score``,
  60), names one issue from ``ISSUE_TYPES`` and lists the missing aspects; every attempt is
  scored, the last one too, and the best attempt is the highest score (ties: the scale's rule).
- ``preset``: the published heuristic thresholds, ``basic`` (top 0.5, mean 0.3: the defaults) and
  ``strict`` (top 0.8, mean 0.7, score variance at most 0.1); ``max_spread`` is the variance check
  on its own. The heuristic diagnoses its failures: low top score -> no_coverage, low mean ->
  partial, high variance -> too_broad.
- ``switch_strategy``: issue -> strategy. A failed check whose issue is mapped to a strategy
  other than the current one (at first the one the pipeline retrieved with) switches to it
  (through the ``switch`` callable the pipeline gives) and retrieves again; query transforms
  inside ``retrieve`` then regenerate their expansions for the new strategy. An issue mapped to
  the current strategy retries with a new query instead. Such a gate ranks attempts on
  ``question_overlap``. ``max_attempts`` caps the attempts, the first included.
- ``web_fallback``: recorded for the pipeline, which searches the web when the gate failed.
- ``issue_set: design`` (``quality_gate_issues``): the agentic design's issues (missing_key_info,
  wrong_domain, partial_coverage, too_broad, too_narrow, no_coverage) in the scored verdict, the
  heuristic's diagnoses under their names, ``switch_strategy: design`` for the design's
  issue-to-strategy map, and in llm mode a rewrite after each failed check: a second call told
  the issue, the design's guidance for it, the missing aspects and the strategy the retry uses
  (its reply replaces the verdict's own reformulation; an unusable reply keeps that one).
- ``position: after_rerank``: the pipeline reranks each attempt (its rerank judge) before the gate
  judges it, so the verdict sees the reranked top ``max_chunks`` and the kept attempt goes on
  reranked; the chunks' values on the ``retriever`` scale are then the reranker's scores.

After ``run``, ``outcome`` says whether an attempt passed, the retrieval quality in [0, 1] (the
kept attempt's score / 100, or its value on the scale, clipped, for the heuristic; unknown for
binary llm verdicts), the issue and missing aspects, and the kept attempt's strategy.

This module is the loop; beside it are its parameters (``quality_gate_params``), how an attempt is
valued and judged without an LLM (``quality_gate_scoring``) and the LLM's prompts
(``quality_gate_prompts``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel

from ragkit.errors import LLMError
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.retrieval.params import QualityGateInfo
from ragkit.stages.retrieval.quality_gate import scoring
from ragkit.stages.retrieval.quality_gate.attempt_scale import SearchAttempt, best_attempt, best_scored_attempt
from ragkit.stages.retrieval.quality_gate.issues import (
    DESIGN_ISSUES,
    HEURISTIC_TO_DESIGN,
    REWRITE_SYSTEM,
    DesignScoredVerdict,
    RewriteReply,
    build_design_scored_prompt,
    build_rewrite_prompt,
)
from ragkit.stages.retrieval.quality_gate.params import QualityGateParams
from ragkit.stages.retrieval.quality_gate.prompts import (
    NO_ISSUE,
    SYSTEM,
    GateVerdict,
    ScoredVerdict,
    build_prompt,
    build_scored_prompt,
)
from ragkit.stages.retrieval.quality_gate.reformulation_rules import with_reformulation_rules
from ragkit.stages.retrieval.quality_gate.scoring import GateOutcome

Retrieve = Callable[[str], list[NodeWithScore]]
Switch = Callable[[str], None]


def _normal(query: str) -> str:
    return " ".join(query.lower().split())


class QualityGate(QualityGateInfo, Stage):
    params: QualityGateParams

    def __init__(self, params: QualityGateParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    outcome: GateOutcome = GateOutcome()

    def run(self, query: str, retrieve: Retrieve, trace: JudgementLog,
            switch: Switch | None = None, strategy: str | None = None,
            reranked_by: Sequence[str] | None = None) -> list[NodeWithScore]:
        """The chunks of the best attempt; exactly ``retrieve(query)`` when off or on an unusable verdict.

        ``switch(strategy)`` changes the strategy of the next ``retrieve`` calls (``switch_strategy``);
        ``strategy`` is the one ``retrieve`` uses now (the run's retriever, or the strategy judge's
        choice), so an issue mapped to it is no switch: the gate retries with a new query instead
        of repeating the same search. ``reranked_by``: with ``position: after_rerank``, the stages
        that rerank each attempt inside ``retrieve`` (none: the pipeline has no reranker), recorded."""
        self.outcome = GateOutcome()
        first = retrieve(query)
        if not self.enabled:
            return first
        attempts = [self._attempt(query, query, first, strategy)]
        current = strategy
        tried: set[tuple[str, str | None]] = {(_normal(query), current)}
        stopped = "max_retries"
        rounds = self.params.rounds()
        for round_number in range(1, rounds + 2):
            latest = attempts[-1]
            if round_number > rounds:
                # Every attempt gets a verdict when attempts are ranked by it (scored) or it can
                # switch strategy; otherwise, as always, the last retry is not judged.
                if not self._judges_last_attempt():
                    break
                if not self._assess(query, latest, attempts, round_number, trace, final=True):
                    return first
                break
            assessed = self._assess(query, latest, attempts, round_number, trace)
            if not assessed:
                return first
            decision = trace.judgements[-1].decision
            new_query = decision["reformulated_query"]
            target = self.params.switch_map().get(latest.issue or "") if switch is not None else None
            if not latest.sufficient and self._rewrites_by_issue() and latest.issue is not None:
                # The design rewrites the query for the diagnosed issue, for the strategy it retries with.
                switching = switch is not None and target is not None
                new_query = self._rewrite(query, latest, attempts, target if switching else current, decision)
            if latest.sufficient:
                stopped = "sufficient"
            elif switch is not None and target is not None and target != current:
                current = target
                switch(target)
                next_query = new_query if new_query and (_normal(new_query), current) not in tried else latest.query
                tried.add((_normal(next_query), current))
                nodes = retrieve(next_query)
                attempts.append(self._attempt(query, next_query, nodes, current))
                decision.update(action="switch", strategy=current, retry_query=next_query,
                                retry_mean_score=scoring.finite(attempts[-1].mean_score),
                                **self._scale_fields(attempts[-1], "retry_"))
            elif not new_query or (_normal(new_query), current) in tried:
                stopped = "no new query"
            else:
                tried.add((_normal(new_query), current))
                nodes = retrieve(new_query)
                attempts.append(self._attempt(query, new_query, nodes, current))
                decision.update(action="retry", retry_mean_score=scoring.finite(attempts[-1].mean_score),
                                **self._scale_fields(attempts[-1], "retry_"))
            if decision.get("action") not in ("retry", "switch"):
                break

        scored = self.params.mode == "llm" and self.params.verdict == "scored"
        chosen = best_scored_attempt(attempts) if scored else best_attempt(attempts)
        kept = attempts[chosen]
        trace.judgements[-1].decision.update(
            stopped=stopped, chosen_attempt=chosen, chosen_query=kept.query,
            attempts=[scoring.record(self.params, a, self._judges_last_attempt()) for a in attempts],
            kept=[node.node.node_id for node in kept.nodes],
        )
        if self.params.position == "after_rerank":
            trace.judgements[-1].decision.update(position="after_rerank", reranked_by=list(reranked_by or ()))
        self.outcome = scoring.outcome(self.params, attempts, kept)
        return kept.nodes

    def _judges_last_attempt(self) -> bool:
        return (self.params.mode == "llm" and self.params.verdict == "scored") or bool(self.params.switch_map())

    def _rewrites_by_issue(self) -> bool:
        """The design's issue set in llm mode: a failed check is followed by a guided rewrite."""
        return self.params.issue_set == "design" and self.params.mode == "llm"

    def _rewrite(self, question: str, latest: SearchAttempt, attempts: list[SearchAttempt], strategy: str | None,
                 decision: dict[str, Any]) -> str:
        """The query rewritten for ``latest.issue`` with the design's guidance for it; the verdict's own
        reformulation when the rewrite reply cannot be used (recorded as ``rewrite_error``)."""
        issue = cast(str, latest.issue)
        tried = [attempt.query for attempt in attempts[1:]]
        # The reformulation rules bind the query actually searched, so the rewrite gets them too.
        prompt = with_reformulation_rules(build_rewrite_prompt(question, issue, latest.missing_aspects, tried,
                                                               strategy), self.params.reformulation_rules)
        decision.update(rewrite_guidance=DESIGN_ISSUES[issue].guidance, rewrite_strategy=strategy)
        fallback = decision["reformulated_query"]
        try:
            result = self.ask(prompt, RewriteReply, system=REWRITE_SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            decision.update(rewrite_error=str(error), rewrite_query=fallback)
            return fallback
        rewritten = " ".join(result.parsed.query.split()) if result.parsed is not None else ""
        if not rewritten:
            decision.update(rewrite_error=result.parse_error or "empty query", rewrite_raw=result.text,
                            rewrite_query=fallback)
            return fallback
        decision.update(rewrite_query=rewritten)
        return rewritten

    def _attempt(self, question: str, query: str, nodes: list[NodeWithScore], strategy: str | None) -> SearchAttempt:
        return scoring.attempt(self.params, question, query, nodes, strategy)

    def _scale_fields(self, attempt: SearchAttempt, prefix: str = "") -> dict[str, float | None]:
        return scoring.scale_fields(self.params, attempt, prefix)

    def _assess(self, query: str, latest: SearchAttempt, attempts: list[SearchAttempt], round_number: int,
                trace: JudgementLog, final: bool = False) -> bool:
        """Judge ``latest`` and record the round; False when the verdict is unusable (recorded as
        a fallback, and the caller returns the first retrieval)."""
        started = time.perf_counter()
        summary = f"round {round_number}: {latest.query} | {len(latest.nodes)} chunks"
        decision: dict[str, Any] = {"round": round_number, "query": latest.query,
                                    "mean_score": scoring.finite(latest.mean_score), **self._scale_fields(latest)}
        if latest.strategy is not None:
            decision["strategy"] = latest.strategy
        if final:
            decision["action"] = "final check"
        result = None
        if self.params.mode == "heuristic":
            sufficient, new_query, reason, issue = scoring.heuristic_verdict(self.params, query, latest, attempts)
            if issue is not None and self.params.issue_set == "design":
                issue = HEURISTIC_TO_DESIGN[issue]
        else:
            tried = [attempt.query for attempt in attempts[1:]]
            scored = self.params.verdict == "scored"
            design = self.params.issue_set == "design"
            build = (build_design_scored_prompt if design else build_scored_prompt) if scored else build_prompt
            prompt = build(query, latest.nodes[: self.params.max_chunks], self.params.chunk_chars, tried)
            prompt = with_reformulation_rules(prompt, self.params.reformulation_rules)
            if self.params.reformulation_rules != "none":
                decision["reformulation_rules"] = self.params.reformulation_rules
            schema: type[BaseModel] = (DesignScoredVerdict if design else ScoredVerdict) if scored else GateVerdict
            try:
                result = self.ask(prompt, schema, system=SYSTEM, max_tokens=self.params.max_tokens)
            except LLMError as error:
                trace.add(self.judgement(summary, {**decision, "action": "fell back"}, started=started,
                                         fell_back=True, error=str(error)))
                return False
            if result.parsed is None:
                trace.add(self.judgement(summary, {**decision, "action": "fell back"}, result,
                                         started=started, fell_back=True))
                return False
            verdict = result.parsed
            assert isinstance(verdict, (ScoredVerdict, DesignScoredVerdict, GateVerdict))  # the schema asked for
            new_query = " ".join(verdict.reformulated_query.split())
            reason = verdict.reason
            if isinstance(verdict, (ScoredVerdict, DesignScoredVerdict)):
                sufficient = verdict.score >= self.params.pass_score
                issue = None if verdict.issue == NO_ISSUE else verdict.issue
                latest.verdict_score = verdict.score
                latest.missing_aspects = [" ".join(a.split()) for a in verdict.missing_aspects if a.strip()]
                decision.update(score=verdict.score, issue=verdict.issue, missing_aspects=latest.missing_aspects)
            else:
                sufficient, issue = verdict.sufficient, None
        latest.sufficient, latest.issue = sufficient, issue
        decision.update(sufficient=sufficient, reformulated_query=new_query, reason=reason)
        if issue is not None and self.params.mode == "heuristic" and (
                self._judges_last_attempt() or self.params.issue_set == "design"):
            decision["issue"] = issue
        trace.add(self.judgement(summary, decision, result, started=started))
        return True
