"""The profile judge is part of a grid point only where something reads it: where the grid turns
the strategy judge off, the profile would only cost calls, counted against the strategy-off runs
the strategy is compared with. With no strategy judge in the grid, the profile is what the
experiment looks at, and it stays."""

from __future__ import annotations

import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.config.grid import expand_grid

pytestmark = pytest.mark.unit


def mode(point, judge: str) -> str:
    spec = point.judge(judge)
    return "-" if spec is None else spec.params["mode"]


def grid(judges: dict) -> list[tuple[str, str]]:
    """(strategy, profile) of each point; "-": not part of the point."""
    config = config_from_dict({"name": "g", "dataset": {"path": "unused.jsonl"}, "embedders": ["minilm"],
                               "retrievers": ["hybrid"], "judges": judges})
    return sorted((mode(point, "strategy"), mode(point, "profile")) for point in expand_grid(config))


def test_the_profile_is_left_out_where_the_strategy_judge_is_off():
    points = grid({"strategy": ["off", "heuristic"], "profile": "heuristic"})
    assert points == [("-", "-"), ("heuristic", "heuristic")]


def test_without_a_strategy_judge_the_profile_stays():
    assert grid({"profile": ["off", "heuristic"]}) == [("-", "-"), ("-", "heuristic")]
