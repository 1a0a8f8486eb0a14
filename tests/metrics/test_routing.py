"""Routing and abstention rows: hand-computed cases."""

from __future__ import annotations

import pytest

from ragkit.metrics.routing import abstention_scores, routing_scores

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("expected", "chosen", "rows"), [
    ("documents", "documents", {"routing_accuracy": 1.0}),
    ("web", "documents", {"routing_accuracy": 0.0}),
    ("conversational", "conversational", {"routing_accuracy": 1.0}),
    ("web", None, {"routing_accuracy": 0.0}),
    (None, "web", {}),
])
def test_routing(expected, chosen, rows):
    assert routing_scores(expected, chosen) == rows


@pytest.mark.parametrize(("answerable", "abstained", "rows"), [
    (False, True, {"abstention_correct": 1.0}),
    (False, False, {"abstention_correct": 0.0}),
    (True, True, {"abstention_wrong": 1.0}),
    (True, False, {"abstention_wrong": 0.0}),
])
def test_abstention(answerable, abstained, rows):
    assert abstention_scores(answerable, abstained) == rows
