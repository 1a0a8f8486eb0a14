"""The dry run offers int8 when embedding with minilm is most of the estimated time, with the
measured saving and quality cost, and stays silent when it is not or when the total is unknown."""

from __future__ import annotations

import pytest

from ragkit.experiments.estimate import (
    INT8_TIME_RATIO,
    EmbedEstimate,
    LLMEstimate,
    PlanEstimate,
    format_estimate,
    int8_advice,
)


@pytest.mark.unit
def test_most_of_the_time_in_minilm_embedding_gets_the_int8_advice_with_its_saving_and_cost():
    advice = int8_advice({"embed (minilm)": 300.0, "LLM calls (local:smollm2)": 100.0})
    assert advice is not None
    assert "embedding is 75% of the estimated time (embedding and LLM calls only)" in advice
    assert f"about {300 * (1 - INT8_TIME_RATIO):.0f} s less" in advice
    assert "precision: int8" in advice and "nDCG@10" in advice and "measured" in advice


@pytest.mark.unit
@pytest.mark.parametrize("stages", [
    {"embed (minilm)": 100.0, "LLM calls (local:smollm2)": 100.0},  # half is not most
    {"embed (minilm)": 10.0, "LLM calls (local:smollm2)": 300.0},
    {"embed (minilm-onnx)": 300.0},  # already ONNX, precision unknown here: no advice
    {"embed (minilm)": 300.0, "LLM calls (local:smollm2)": None},  # the total is not known
    {"embed (minilm)": None},
    {"embed (minilm)": 0.0},
    {},
])
def test_no_advice_when_minilm_embedding_is_not_known_to_be_most_of_the_time(stages):
    assert int8_advice(stages) is None


def _estimate(embed_seconds: float | None, llm_seconds: float | None) -> PlanEstimate:
    return PlanEstimate(
        experiment="x", questions=10, runs=2, runs_to_compute=2, questions_to_compute=20, chunk_sets=[],
        indexes=[], chunk_sets_to_build=1, indexes_to_build=1,
        embedding=[EmbedEstimate(embedder="minilm", chunks=1000, to_embed=1000, seconds=embed_seconds,
                                 measured="20.0 chunks/s over 500 chunks")],
        llm=[LLMEstimate(backend="local:smollm2", calls_by_role={"generator": 20}, seconds=llm_seconds,
                         measured="1.00 s/call over 20 calls")],
        seconds=None if embed_seconds is None or llm_seconds is None else embed_seconds + llm_seconds)


@pytest.mark.unit
def test_the_dry_run_text_carries_the_advice_only_when_it_applies():
    assert "minilm-onnx with precision int8" in format_estimate(_estimate(50.0, 20.0)).splitlines()[-1]
    assert "int8" not in format_estimate(_estimate(5.0, 20.0))
    assert "int8" not in format_estimate(_estimate(None, 20.0))
