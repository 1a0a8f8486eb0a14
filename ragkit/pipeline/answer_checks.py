"""The answer's checks in ``ragkit.pipeline.pipeline.Pipeline``, after generation: groundedness (with
hallucination correction on a failed check), the answer check, and the late tier (``retry``: grade,
retry a failed answer by its issue, keep the best attempt). Each check and each retry is a step
of its own (``ragkit.pipeline.steps``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragkit.pipeline.steps import StepRecorder
from ragkit.stages.answer.answer_retry import AnswerAttempt, AnswerRetry
from ragkit.stages.answer.correction import CorrectionAttempt, HallucinationCorrector
from ragkit.stages.question import AnswerActions, QuestionContext

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from ragkit.pipeline.trace import Trace
    from ragkit.retrievers.switchable import SwitchableRetriever
    from ragkit.stages.answer.generator import Answer
    from ragkit.stages.base import Judgement, JudgementLog
    from ragkit.stages.roles import CheckRole, GenerateRole, VerifyRole


def quality_for(generator: Any, quality: float | None) -> dict[str, Any]:
    """``{"retrieval_quality": quality}`` for a generator that declares it reads the retrieval
    quality (``inputs``), else nothing: a plugin's ``generate`` without the argument keeps working."""
    return {"retrieval_quality": quality} if "quality" in (getattr(generator, "inputs", None) or ()) else {}


@dataclass
class AnswerChecker:
    """Runs the verify and check roles' stages on a generated answer and records the outcome in
    the trace. The pipeline's searches a correction or a retry may run: ``search_once(trace,
    query, log, stage)``, one search timed as ``stage`` then the context stages;
    ``search_again(trace, query, log)``, the whole retrieval path (query expansion inside the
    quality gate, then the context stages) and the gate's quality of the kept attempt.
    ``switchable``: the retriever whose strategy they may change (None: there is none)."""

    steps: StepRecorder
    verify: VerifyRole | None
    check: CheckRole | None
    search_once: Callable[[Trace, str, JudgementLog, str], list[NodeWithScore]]
    search_again: Callable[[Trace, str, JudgementLog], tuple[list[NodeWithScore], float | None]]
    switchable: SwitchableRetriever | None = None

    def after_generation(self, trace: Trace, context: QuestionContext, generator: GenerateRole,
                         retrieval_quality: float | None, can_re_retrieve: bool) -> None:
        """Groundedness (and its corrections), then the answer check: with ``retry``, the late tier
        on an answer it can grade. ``retrieval_quality``: the quality gate's, of the chunks the
        answer read; ``can_re_retrieve`` False: they cannot be searched again (web results)."""
        if self.verify is not None:
            self._check_groundedness(trace, context, self.verify, generator, retrieval_quality, can_re_retrieve)
        checker = self.check
        if checker is not None and checker.params.retry and trace.answer is not None and trace.answer.text \
                and not trace.answer.abstained:
            self._retry_answer(trace, context, checker, generator, retrieval_quality, can_re_retrieve)
        else:
            self.check_answer(trace, context)

    def _actions(self, regenerate: Callable[[list[NodeWithScore], list[str]], Answer],
                 re_retrieve: Callable[[str], list[NodeWithScore]], can_re_retrieve: bool) -> AnswerActions:
        switchable = self.switchable if can_re_retrieve else None
        return AnswerActions(regenerate, re_retrieve if can_re_retrieve else None,
                             switch=switchable.use if switchable is not None else None,
                             strategy=switchable.current if switchable is not None else None)

    def _check_groundedness(self, trace: Trace, context: QuestionContext, groundedness: VerifyRole,
                            generator: GenerateRole, retrieval_quality: float | None, can_re_retrieve: bool) -> None:
        answer = trace.answer
        assert answer is not None  # the pipeline generated it
        if answer.abstained:
            trace.groundedness_error = "the generator abstained: no claims to check"
            return
        if not answer.text:
            trace.groundedness_error = f"no answer to check: {answer.error or 'empty answer'}"
            return
        log = context.log

        def check(candidate: Answer, nodes: list[NodeWithScore]) -> tuple[float | None, Judgement | None]:
            contexts = [node.node.get_content() for node in nodes]
            return self.steps.run(trace, f"judge:{groundedness.name}",
                                  lambda: groundedness.judge(context.question, candidate.text, contexts, log))

        score, judgement = check(answer, trace.nodes)
        if groundedness.params.on_fail != "off":
            def regenerate(nodes: list[NodeWithScore], unsupported: list[str]) -> Answer:
                return self.steps.run(trace, "correct:regenerate", lambda: generator.generate(
                    context.question, nodes, log, feedback=unsupported, history=context.history,
                    **quality_for(generator, retrieval_quality)))

            def re_retrieve(refined: str) -> list[NodeWithScore]:
                # The new context goes through the same context stages (rerank, enrichment) as the first.
                return self.search_once(trace, refined, log, "correct:re_retrieve")

            result = HallucinationCorrector(groundedness.params).run(
                context, CorrectionAttempt(answer, list(trace.nodes), score, judgement),
                self._actions(regenerate, re_retrieve, can_re_retrieve), check, retrieval_quality)
            trace.answer, trace.nodes, score, judgement = result.answer, list(result.nodes), result.score, \
                result.judgement
        trace.groundedness = score
        if score is None and judgement is not None:
            trace.groundedness_error = judgement.decision.get("no_score_reason") or judgement.error

    def _retry_answer(self, trace: Trace, context: QuestionContext, checker: CheckRole, generator: GenerateRole,
                      retrieval_quality: float | None, can_re_retrieve: bool) -> None:
        """The late tier (``answer_check.retry``, ``ragkit.stages.answer.answer_retry``): grade, retry
        a failed answer by its issue, keep the best attempt. A kept retry is checked for
        groundedness again (no correction), so that score is the final answer's."""
        answer = trace.answer
        assert answer is not None  # the caller checked it
        log = context.log

        def grade(candidate: Answer, nodes: list[NodeWithScore]) -> tuple[dict[str, float | None], Judgement | None]:
            contexts = [node.node.get_content() for node in nodes]
            return self.steps.run(trace, f"judge:{checker.name}",
                                  lambda: checker.grade(trace.question, candidate.text, contexts, log))

        def regenerate(nodes: list[NodeWithScore], feedback: list[str]) -> Answer:
            # The quality of the latest search (a re-retrieval's), else the first retrieval's.
            quality = searched[-1] if searched else retrieval_quality
            return self.steps.run(trace, "retry:regenerate", lambda: generator.generate(
                context.question, nodes, log, feedback=feedback or None, history=context.history,
                **quality_for(generator, quality)))

        searched: list[float | None] = []  # the quality of each search through the pipeline

        def re_retrieve(retry_query: str) -> list[NodeWithScore]:
            if checker.params.re_retrieve_via == "pipeline":
                # Back through query expansion and the quality gate (its own retries), as the design's late tier.
                nodes, quality = self.search_again(trace, retry_query, log)
                searched.append(quality)
                return nodes
            return self.search_once(trace, retry_query, log, "retry:re_retrieve")

        scores, judgement = grade(answer, trace.nodes)
        result = AnswerRetry(checker.params).run(
            context, AnswerAttempt(answer, list(trace.nodes), scores, judgement, retrieval_quality=retrieval_quality),
            self._actions(regenerate, re_retrieve, can_re_retrieve), grade,
            retrieval_quality=lambda: searched[-1] if searched else None)
        trace.answer, trace.nodes, trace.answer_check = result.answer, list(result.nodes), result.scores
        if all(value is None for value in result.scores.values()) and judgement is not None:
            trace.answer_check_error = judgement.error  # the reason the reply was unusable
        if result.kept and (verify := self.verify) is not None:
            contexts = [node.node.get_content() for node in trace.nodes]
            kept = result.answer
            score, grounded = self.steps.run(trace, f"judge:{verify.name}",
                                             lambda: verify.judge(context.question, kept.text, contexts, log))
            trace.groundedness = score
            trace.groundedness_error = None if score is not None or grounded is None else \
                grounded.decision.get("no_score_reason") or grounded.error

    def check_answer(self, trace: Trace, context: QuestionContext) -> None:
        """The answer check once (no retry), on an answer that is neither empty nor an abstention."""
        if (checker := self.check) is None:
            return
        answer = trace.answer
        if answer is None or not answer.text or answer.abstained:
            trace.answer_check_error = "no answer to check" if answer is None or not answer.text else \
                "the generator abstained"
            return
        contexts = [node.node.get_content() for node in trace.nodes]
        log = context.log
        trace.answer_check = self.steps.run(trace, f"judge:{checker.name}",
                                            lambda: checker.check(trace.question, answer.text, contexts, log))
        if all(value is None for value in trace.answer_check.values()) and log.judgements:
            trace.answer_check_error = log.judgements[-1].error  # the reason the reply was unusable
