"""The machine's throughput measurements: totals add up, a broken file is no measurement."""

from __future__ import annotations

import pytest

from ragkit.experiments.throughput import read_throughput, record_throughput, throughput_path

pytestmark = pytest.mark.unit


def test_measurements_add_up_per_component_and_nothing_is_recorded_for_nothing(tmp_path):
    record_throughput(tmp_path, "embedders", "k1", "minilm", 100, 4.0)
    record_throughput(tmp_path, "embedders", "k1", "minilm", 50, 1.0)
    record_throughput(tmp_path, "llms", "k2", "local:SmolLM2", 3, 6.0)
    record_throughput(tmp_path, "llms", "k3", "ollama:x", 0, 0.0)  # every call from the cache
    measured = read_throughput(tmp_path)
    assert measured["embedders"]["k1"].per_second == pytest.approx(150 / 5.0)
    assert measured["llms"]["k2"].seconds_per_item == pytest.approx(2.0)
    assert "k3" not in measured["llms"]


def test_an_unreadable_file_reads_as_no_measurement_and_is_replaced(tmp_path):
    throughput_path(tmp_path).write_text("{not json", encoding="utf-8")
    assert read_throughput(tmp_path) == {"embedders": {}, "llms": {}}
    record_throughput(tmp_path, "llms", "k", "local:m", 2, 1.0)
    assert read_throughput(tmp_path)["llms"]["k"].items == 2
