"""Runs written before an option existed compare with runs written since (defaults filled)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragkit.analysis.defaults import with_added_defaults
from ragkit.analysis.labels import run_labels
from ragkit.analysis.pairing import factor_levels

pytestmark = pytest.mark.unit


def test_an_old_run_without_an_added_option_has_the_same_level_as_a_new_run_at_its_default():
    runs = pd.DataFrame({
        "run_id": ["old", "new", "scoped"], "chunker": ["token"] * 3, "embedder": ["minilm"] * 3,
        "retriever": ["dense"] * 3, "top_k": [5, 10, 10],
        # The old run predates `scope`; the new ones write it. A judge option likewise.
        "retriever.scope": [math.nan, "all", "question_doc"],
        "judge.groundedness": ["llm", "llm", "off"], "judge.groundedness.max_claims": [8, 8, math.nan],
        "judge.groundedness.on_fail": [math.nan, "off", math.nan],
    })
    filled = with_added_defaults(runs)
    assert filled["retriever.scope"].tolist() == ["all", "all", "question_doc"]
    assert filled["judge.groundedness.on_fail"].tolist()[:2] == ["off", "off"]
    assert pd.isna(filled.loc[2, "judge.groundedness.on_fail"])  # off: no parameters in effect
    levels = factor_levels(filled)
    assert levels.loc["old", "retriever"] == levels.loc["new", "retriever"] == "dense(scope=all)"
    assert levels.loc["old", "judge.groundedness"] == levels.loc["new", "judge.groundedness"]
    assert run_labels(filled).tolist()[:2] == ["token · minilm · dense(scope=all) · k=5 · +groundedness(llm)",
                                               "token · minilm · dense(scope=all) · k=10 · +groundedness(llm)"]


def test_an_uninstalled_component_and_a_missing_column_are_left_alone():
    runs = pd.DataFrame({"run_id": ["a"], "chunker": ["plugin_chunker"], "embedder": [None],
                         "retriever": ["bm25"], "top_k": [5]})
    filled = with_added_defaults(runs)
    assert filled.loc[0, "retriever.scope"] == "all" and "chunker.summaries" not in filled.columns
