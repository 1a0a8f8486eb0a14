"""ragkit.metrics.names: one catalogue of metric names, parsed the way every module reads them."""

from __future__ import annotations

import pytest

from ragkit.metrics.names import (
    AGENTIC_METRICS,
    GENERATION_METRICS,
    MetricName,
    better_direction,
    failure_value,
    parse_metric,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("name", "parsed", "level", "depth_dependent"), [
    ("recall@5", MetricName("recall", k=5), "document", True),
    ("span_ndcg@10", MetricName("span_ndcg", k=10), "span", True),
    ("mrr", MetricName("mrr"), "document", True),
    ("span_mrr@3", MetricName("span_mrr", k=3), "span", True),
    ("span_recall@512tok", MetricName("span_recall", budget=512), "span", False),
    ("final_tokens", MetricName("final_tokens"), "final", False),
    ("faithfulness", MetricName("faithfulness"), "generation", False),
    ("faithfulness.judge_sd", MetricName("faithfulness.judge_sd"), "other", False),
])
def test_parse_metric(name, parsed, level, depth_dependent):
    assert parse_metric(name) == parsed
    assert (parse_metric(name).level, parse_metric(name).depth_dependent) == (level, depth_dependent)


def test_every_generation_metric_is_in_the_catalogue():
    from ragkit.metrics.generation import METRICS

    assert set(GENERATION_METRICS) == set(METRICS) | {"groundedness"} | set(AGENTIC_METRICS)


@pytest.mark.parametrize(("name", "direction", "failed"), [
    ("recall@5", 1, 0.0), ("final_tokens", 0, 0.0), ("abstention_correct", 1, 0.0),
    ("abstention_wrong", -1, 1.0), ("routing_accuracy", 1, 0.0),
])
def test_direction_and_the_value_a_failure_counts_as(name, direction, failed):
    assert (better_direction(name), failure_value(name)) == (direction, failed)
