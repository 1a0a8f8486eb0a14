"""The answer's checks in ``ragkit.pipeline.Pipeline``, after generation: groundedness (with
hallucination correction on a failed check), the answer check, and the late tier (``retry``: grade,
retry a failed answer by its issue, keep the best attempt). Each check and each retry is a step
of its own (``ragkit.pipeline_steps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

from ragkit.pipeline_steps import StepAccounting
from ragkit.stages.answer.answer_retry import AnswerAttempt, AnswerRetry
from ragkit.stages.answer.correction import Attempt, HallucinationCorrector
from ragkit.stages.answer.generator import Answer
from ragkit.stages.base import Judgement, JudgeTrace

if TYPE_CHECKING:  # annotations only: ragkit.pipeline imports this module
    from ragkit.pipeline import Trace
    from ragkit.retrievers.switchable import SwitchableRetriever


def quality_for(generator: Any, quality: float | None) -> dict[str, Any]:
    """``{"retrieval_quality": quality}`` for a generator that declares it reads the retrieval
    quality (``inputs``), else nothing: a plugin's ``generate`` without the argument keeps working."""
    return {"retrieval_quality": quality} if "quality" in getattr(generator, "inputs", ()) else {}


class AnswerChecks(StepAccounting):
    """Mixed into ``ragkit.pipeline.Pipeline``, which declares these attributes and defines the
    two methods below (the stage of a role; the context stages over new chunks)."""

    retriever: BaseRetriever
    switchable: SwitchableRetriever | None

    if TYPE_CHECKING:
        def _one(self, role: str) -> Any | None: ...

        def _context(self, trace: Trace, query: str, nodes: list[NodeWithScore], judged: JudgeTrace,
                     skip: Sequence[Any] = (), only: Sequence[Any] | None = None) -> list[NodeWithScore]: ...

        def _search_again(self, trace: Trace, query: str,
                          judged: JudgeTrace) -> tuple[list[NodeWithScore], float | None]: ...

    def _check_groundedness(self, trace: Trace, groundedness: Any, generator: Any,
                            question: str, query: str, history: Sequence[Any], judged: JudgeTrace,
                            retrieval_quality: float | None, can_re_retrieve: bool) -> None:
        answer = trace.answer
        assert answer is not None  # _generate_and_check set it
        if answer.abstained:
            trace.groundedness_error = "the generator abstained: no claims to check"
            return
        if not answer.text:
            trace.groundedness_error = f"no answer to check: {answer.error or 'empty answer'}"
            return

        def check(candidate: Answer, nodes: list[NodeWithScore]) -> tuple[float | None, Judgement | None]:
            contexts = [node.node.get_content() for node in nodes]
            return self._step(trace, f"judge:{groundedness.name}",
                              lambda: groundedness.judge(question, candidate.text, contexts, judged))

        score, judgement = check(answer, trace.nodes)
        if groundedness.params.on_fail != "off":
            def regenerate(nodes: list[NodeWithScore], unsupported: list[str]) -> Answer:
                return self._step(trace, "correct:regenerate", lambda: generator.generate(
                    question, nodes, judged, feedback=unsupported, history=history,
                    **quality_for(generator, retrieval_quality)))

            def re_retrieve(refined: str) -> list[NodeWithScore]:
                # The new context goes through the same context stages (rerank, enrichment) as the first.
                return self._context(trace, refined, self._step(
                    trace, "correct:re_retrieve", lambda: self.retriever.retrieve(refined)), judged)

            switchable = self.switchable if can_re_retrieve else None
            result = HallucinationCorrector(groundedness.params).run(
                query, Attempt(answer, list(trace.nodes), score, judgement), regenerate=regenerate,
                re_retrieve=re_retrieve if can_re_retrieve else None, check=check,
                retrieval_quality=retrieval_quality, trace=judged,
                switch=switchable.use if switchable is not None else None,
                strategy=switchable.current if switchable is not None else None)
            trace.answer, trace.nodes, score, judgement = result.answer, list(result.nodes), result.score, \
                result.judgement
        trace.groundedness = score
        if score is None and judgement is not None:
            trace.groundedness_error = judgement.decision.get("no_score_reason") or judgement.error

    def _retry_answer(self, trace: Trace, checker: Any, generator: Any, question: str, query: str,
                      history: Sequence[Any], judged: JudgeTrace, can_re_retrieve: bool,
                      retrieval_quality: float | None = None) -> None:
        """The late tier (``answer_check.retry``, ``ragkit.stages.answer.answer_retry``): grade, retry
        a failed answer by its issue, keep the best attempt. A kept retry is checked for
        groundedness again (no correction), so that score is the final answer's."""
        answer = trace.answer
        assert answer is not None  # the caller checked it

        def grade(candidate: Answer, nodes: list[NodeWithScore]) -> tuple[dict[str, float | None], Judgement | None]:
            contexts = [node.node.get_content() for node in nodes]
            return self._step(trace, f"judge:{checker.name}",
                              lambda: checker.grade(trace.question, candidate.text, contexts, judged))

        def regenerate(nodes: list[NodeWithScore], feedback: list[str]) -> Answer:
            # The quality of the latest search (a re-retrieval's), else the first retrieval's.
            quality = searched[-1] if searched else retrieval_quality
            return self._step(trace, "retry:regenerate", lambda: generator.generate(
                question, nodes, judged, feedback=feedback or None, history=history,
                **quality_for(generator, quality)))

        searched: list[float | None] = []  # the quality of each search through the pipeline

        def re_retrieve(retry_query: str) -> list[NodeWithScore]:
            if checker.params.re_retrieve_via == "pipeline":
                # Back through query expansion and the quality gate (its own retries), as the design's late tier.
                nodes, quality = self._search_again(trace, retry_query, judged)
                searched.append(quality)
                return nodes
            return self._context(trace, retry_query, self._step(
                trace, "retry:re_retrieve", lambda: self.retriever.retrieve(retry_query)), judged)

        switchable = self.switchable if can_re_retrieve else None
        scores, judgement = grade(answer, trace.nodes)
        result = AnswerRetry(checker.params).run(
            query, AnswerAttempt(answer, list(trace.nodes), scores, judgement, retrieval_quality=retrieval_quality),
            grade=grade, regenerate=regenerate, re_retrieve=re_retrieve if can_re_retrieve else None, trace=judged,
            switch=switchable.use if switchable is not None else None,
            strategy=switchable.current if switchable is not None else None,
            retrieval_quality=lambda: searched[-1] if searched else None)
        trace.answer, trace.nodes, trace.answer_check = result.answer, list(result.nodes), result.scores
        if all(value is None for value in result.scores.values()) and judgement is not None:
            trace.answer_check_error = judgement.error  # the reason the reply was unusable
        if result.kept and (verify := self._one("verify")) is not None:
            contexts = [node.node.get_content() for node in trace.nodes]
            kept = result.answer
            score, grounded = self._step(trace, f"judge:{verify.name}",
                                         lambda: verify.judge(question, kept.text, contexts, judged))
            trace.groundedness = score
            trace.groundedness_error = None if score is not None or grounded is None else \
                grounded.decision.get("no_score_reason") or grounded.error

    def _check_answer(self, trace: Trace, judged: JudgeTrace) -> None:
        if (checker := self._one("check")) is None:
            return
        answer = trace.answer
        if answer is None or not answer.text or answer.abstained:
            trace.answer_check_error = "no answer to check" if answer is None or not answer.text else \
                "the generator abstained"
            return
        contexts = [node.node.get_content() for node in trace.nodes]
        trace.answer_check = self._step(trace, f"judge:{checker.name}",
                                        lambda: checker.check(trace.question, answer.text, contexts, judged))
        if all(value is None for value in trace.answer_check.values()) and judged.judgements:
            trace.answer_check_error = judged.judgements[-1].error  # the reason the reply was unusable
