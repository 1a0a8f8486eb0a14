"""Result rows of one answered question: its scores, retrieved chunks, stages, judgements and
answer, keyed by run and question. Every question a run is asked leaves a row per metric it is
scored on: a failed question has NaN with its error for each of those metrics (the names come
from scoring an empty final context, so they are exactly the names a success writes), and a
question with no ground truth has a ``retrieval`` row saying so."""

from __future__ import annotations

import json
import math

from ragkit.experiments.plan import RunStep
from ragkit.metrics.generation import EvaluationParams, GenerationSample, evaluate_generation
from ragkit.metrics.names import NOTHING_TO_SCORE, SEMANTIC_CACHE_HIT
from ragkit.metrics.retrieval import AnswerGroups, FinalContext, has_relevant, has_spans, question_metrics
from ragkit.metrics.routing import abstention_scores, routing_scores
from ragkit.pipeline.trace import Trace
from ragkit.questions import Question
from ragkit.stages.answer.answer_check import ANSWER_CHECK_METRICS, answer_check_scores


def question_row(question: Question) -> dict:
    """The ``questions`` table row; a question without a source document is its own cluster."""
    return {"question_id": question.id, "text": question.text, "document": question.source_document or question.id,
            "n_relevant_docs": len(question.relevant_docs), "n_answer_groups": len(question.span_groups()),
            "question_key": question.content_key()}


def judgement_row(run_id: str, question_id: str | None, row: dict) -> dict:
    """A ``judgements`` row: a judge's decision as JSON, with the document it was about."""
    decision = dict(row["decision"])
    if row.get("doc_id"):
        decision.setdefault("doc_id", row["doc_id"])
    return {**{k: v for k, v in row.items() if k != "doc_id"}, "run_id": run_id, "question_id": question_id,
            "decision": json.dumps(decision, default=str, ensure_ascii=False)}


def _error_score(run: RunStep, question: Question, metric: str, error: str) -> dict:
    return {"run_id": run.run_id, "question_id": question.id, "metric": metric, "value": math.nan, "error": error}


def evaluation_names(params: EvaluationParams) -> list[str]:
    """The score rows an evaluation writes per question (with the repeat suffixes), read off the
    evaluation itself: a sample with nothing in it fails every metric's input check, so nothing
    is computed and no model is called."""
    nothing = GenerationSample(question_id="-", question="", answer="")
    return evaluate_generation([nothing], params, llm=None, embed_model=None)["metric"].tolist()


def failure_scores(run: RunStep, question: Question, error: str, evaluation: EvaluationParams | None) -> list[dict]:
    """NaN with ``error`` for every metric the question would have been scored on (``evaluation``:
    the run's evaluation, if it has one)."""
    names = [row["metric"] for row in _scores(run, question, FinalContext.empty(), Trace(question=question.text))]
    if evaluation is not None:
        names += evaluation_names(evaluation)
    return [_error_score(run, question, name, error) for name in names]


def _answer_groups(question: Question) -> AnswerGroups:
    return [[(span.doc_id, span.start, span.end) for span in group] for group in question.scored_span_groups()]


def _scores(run: RunStep, question: Question, context: FinalContext, trace: Trace) -> list[dict]:
    """The score rows of the final context and the groundedness judge (not the evaluation)."""
    keys = {"run_id": run.run_id, "question_id": question.id}
    groups = _answer_groups(question)
    passages = [(span.doc_id, span.start, span.end) for span in question.passages]
    values = question_metrics(context, question.relevant_docs, groups, run.point.top_k, run.ks, passages)
    scores = [{**keys, "metric": name, "value": value, "error": None} for name, value in values.items()]
    if not (has_relevant(question.relevant_docs) or has_spans(groups)):
        # a question nothing can be scored against is a visible row, not a silent gap
        scores.append(_error_score(run, question, "retrieval", NOTHING_TO_SCORE))
    scores += _agentic_scores(run, question, trace)
    if run.point.retriever.params.get("semantic_cache") is not None:
        scores.append(_cache_score(run, question, trace))
    if run.point.judge("groundedness") is not None:
        if trace.groundedness is None:
            scores.append(_error_score(run, question, "groundedness", trace.groundedness_error or "not scored"))
        else:
            scores.append({**keys, "metric": "groundedness", "value": trace.groundedness, "error": None})
    return scores


def _cache_score(run: RunStep, question: Question, trace: Trace) -> dict:
    """The share of the question's searches the semantic cache answered; none searched (a
    conversational or web route) is a visible row, not a miss."""
    lookups = trace.cache_lookups
    if not lookups:
        return _error_score(run, question, SEMANTIC_CACHE_HIT, "no search of the documents")
    return {"run_id": run.run_id, "question_id": question.id, "metric": SEMANTIC_CACHE_HIT,
            "value": sum(lookup.hit for lookup in lookups) / len(lookups), "error": None}


def _agentic_scores(run: RunStep, question: Question, trace: Trace) -> list[dict]:
    """Routing, abstention and answer-check rows, on the runs and questions they apply to.

    Routing is scored on every run of a question that labels its expected route: a run without
    the router sends every question to the documents, which is its baseline. Abstention is scored
    on every run with a generator, whatever else the question set holds: a question's rows depend
    on that question alone, so a set grown question by question (only new questions answered) has
    the rows a set run whole has, and no mean covers fewer questions than the run answered."""
    keys = {"run_id": run.run_id, "question_id": question.id}
    rows = []
    if question.expected_route is not None:
        chosen = trace.route or "documents"
        rows += [{**keys, "metric": name, "value": value, "error": None}
                 for name, value in routing_scores(question.expected_route, chosen).items()]
    if run.point.generator is not None:
        abstained = trace.abstained
        rows += [{**keys, "metric": name, "value": value, "error": None}
                 for name, value in abstention_scores(question.answerable, abstained).items()]
    if run.point.judge("answer_check") is not None:
        if trace.answer_check is None:
            error = trace.answer_check_error or "not checked"
            rows += [_error_score(run, question, name, error) for name in ANSWER_CHECK_METRICS]
        else:
            for name, value in answer_check_scores(trace.answer_check).items():
                rows.append({**keys, "metric": name, "value": value, "error": None} if value is not None
                            else _error_score(run, question, name, trace.answer_check_error or "unusable reply"))
    return rows


def question_rows(run: RunStep, question: Question, trace: Trace) -> dict[str, list[dict]]:
    """The rows of one answered question, per table (the evaluation's are added by the caller)."""
    keys = {"run_id": run.run_id, "question_id": question.id}
    nodes = trace.nodes
    ranked = [(n.node.metadata["doc_id"], n.node.metadata["start_char"], n.node.metadata["end_char"]) for n in nodes]
    context = FinalContext.from_texts(ranked, [node.node.get_content() for node in nodes])
    retrievals = [{**keys, "rank": rank, "chunk_id": node.node.node_id, "doc_id": item[0], "start_char": item[1],
                   "end_char": item[2], "score": float(node.score or 0.0), "tokens": tokens}
                  for rank, (item, node, tokens) in enumerate(zip(ranked, nodes, context.tokens), start=1)]
    answers = []
    if trace.answer is not None:
        answer = trace.answer
        contexts = {node.node.node_id: node.node.get_content() for node in nodes}
        answers.append({**keys, "answer": answer.text, "citations": json.dumps(answer.citations),
                        "contexts": json.dumps([contexts[i] for i in contexts], ensure_ascii=False),
                        "prompt": answer.prompt, "valid": answer.valid, "error": answer.error})
    return {
        "scores": _scores(run, question, context, trace),
        "retrievals": retrievals,
        "stages": [{**keys, **row} for row in trace.stages],
        "judgements": [judgement_row(run.run_id, question.id, j.as_row()) for j in trace.judgements],
        "answers": answers,
    }
