"""Generation metrics for one answered question, inside a run: its score rows and the
evaluation's own stage rows (``eval:<metric>``), kept apart from the pipeline's cost."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragkit.llms.calls import LLMClient
from ragkit.metrics.generation import EvaluationParams, GenerationSample, evaluate_generation
from ragkit.pipeline.steps import stage_row
from ragkit.pipeline.trace import Trace
from ragkit.questions import Question
from ragkit.results.schema import EVAL_STAGE

if TYPE_CHECKING:
    from llama_index.core.schema import Document

# Characters kept on each side of an answer span for its reference context: about a paragraph.
SPAN_CONTEXT_CHARS = 300


def reference_contexts(question: Question, documents: Mapping[str, Document]) -> list[str]:
    """The gold passages the non-LLM context metrics compare to: the question's relevant passages
    (an imported set's located reference contexts), else the text around each answer span."""
    passages = [documents[p.doc_id].text[p.start:p.end] for p in question.passages if p.doc_id in documents]
    if passages:
        return passages
    for span in question.spans:
        document = documents.get(span.doc_id)
        if document is not None:
            text = document.text
            passages.append(text[max(0, span.start - SPAN_CONTEXT_CHARS): span.end + SPAN_CONTEXT_CHARS])
    return passages


def sample_for(question: Question, trace: Trace, documents: Mapping[str, Document]) -> GenerationSample:
    return GenerationSample(
        question_id=question.id,
        question=question.text,
        answer=trace.answer.text if trace.answer is not None else "",
        contexts=[node.node.get_content() for node in trace.nodes],
        reference=question.answers[0] if question.answers else None,
        reference_contexts=reference_contexts(question, documents) or None,
        # One text per part (its first alternative): a part is one claim of the ground truth.
        reference_parts=[alternatives[0] for alternatives in question.answer_parts if alternatives] or None,
    )


@dataclass
class QuestionEvaluator:
    params: EvaluationParams
    llm: LLMClient | None
    embed_model: Any
    documents: Mapping[str, Document]

    def __call__(self, question: Question, trace: Trace) -> tuple[list[dict], list[dict]]:
        """``(score rows, stage rows)`` without run_id; a metric that fails is NaN with its reason."""
        # Its own usage records: the calls of an evaluation that times out go on in ragas' thread,
        # and must not be charged to the next question's steps (they are not counted at all).
        llm = self.llm.with_own_usage() if self.llm is not None else None
        started = time.perf_counter()
        frame = evaluate_generation([sample_for(question, trace, self.documents)], self.params,
                                    llm=llm, embed_model=self.embed_model)
        seconds = time.perf_counter() - started
        usage = llm.drain_usage() if llm is not None else []
        stages = [stage_row(item.stage, item.seconds, [item]) for item in usage]
        # What the LLM stages do not cover: embedding and string metrics, ragas' own work.
        stages.append(stage_row(EVAL_STAGE, max(0.0, seconds - sum(item.seconds for item in usage)), []))
        scores = [{"metric": row.metric, "value": row.value, "error": row.error if isinstance(row.error, str) else None}
                  for row in frame.itertuples(index=False)]
        return scores, stages
