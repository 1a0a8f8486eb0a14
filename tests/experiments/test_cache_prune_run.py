"""Pruning the caches beside real runs: young entries survive and a re-run searches nothing;
pruned entries are searched again on the next run, with the same results."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from ragkit.caches.pruning import cache_sizes, parse_duration, prune_caches
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from tests.experiments.test_retrieval_cache_run import CONFIG, searches  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_prune_keeps_young_entries_and_a_pruned_search_is_recomputed(tmp_path, searches):  # noqa: F811
    data_dir = get_settings().resolved_data_dir()
    run_experiment(config_from_dict(CONFIG), tmp_path / "first")
    assert searches["n"] == 6 and cache_sizes(data_dir)[1].entries == 6

    (_, retrieval, _) = prune_caches(data_dir, parse_duration("1d"))
    assert (retrieval.removed, retrieval.kept) == (0, 6)
    run_experiment(config_from_dict(CONFIG), tmp_path / "again")
    assert searches["n"] == 6  # nothing searched: every entry was kept

    two_days_on = time.time() + 2 * 86_400
    (_, retrieval, _) = prune_caches(data_dir, parse_duration("1d"), clock=lambda: two_days_on)
    assert (retrieval.removed, retrieval.kept) == (6, 0)
    run_experiment(config_from_dict(CONFIG), tmp_path / "after")
    assert searches["n"] == 12  # every pruned search done again
    keys = ["run_id", "question_id", "rank"]
    first, after = ResultStore(tmp_path / "first"), ResultStore(tmp_path / "after")
    pd.testing.assert_frame_equal(first.read("retrievals").sort_values(keys).reset_index(drop=True),
                                  after.read("retrievals").sort_values(keys).reset_index(drop=True))
