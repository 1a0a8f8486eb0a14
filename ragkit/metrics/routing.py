"""Per-question outcomes of routing and abstention, as score rows.

- ``routing_accuracy``: 1 when the route taken is the question's ``expected_route``, else 0;
  only on questions that label one. A run without a router takes the documents route.
- ``abstention_correct``: on a question the documents cannot answer (``answerable: false``), 1
  when the answer abstained ("not found"), else 0: the rate of correct abstentions.
- ``abstention_wrong``: on an answerable question, 1 when the answer abstained, else 0: the rate of
  wrong abstentions (lower is better).
"""

from __future__ import annotations


def routing_scores(expected: str | None, chosen: str | None) -> dict[str, float]:
    if expected is None:
        return {}
    return {"routing_accuracy": float(chosen == expected)}


def abstention_scores(answerable: bool, abstained: bool) -> dict[str, float]:
    return {"abstention_wrong": float(abstained)} if answerable else {"abstention_correct": float(abstained)}
