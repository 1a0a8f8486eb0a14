"""Runs written before an option existed compare with runs written since (defaults filled)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragkit.analysis.defaults import with_added_defaults
from ragkit.analysis.pairing import factor_levels
from ragkit.analysis.run_names import run_labels

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


def test_the_built_in_table_of_added_defaults_is_what_the_registries_say():
    from ragkit.analysis.defaults import BUILT_IN_ADDED_DEFAULTS, registry_added_defaults, registry_of

    for kind, known in BUILT_IN_ADDED_DEFAULTS.items():
        builtin = [name for name in registry_of(kind).names() if name in known or not _is_plugin(kind, name)]
        actual = {name: registry_added_defaults(kind, name) for name in builtin}
        assert known == actual, f"update BUILT_IN_ADDED_DEFAULTS['{kind}'] in ragkit/analysis/defaults.py to {actual}"


def _is_plugin(kind: str, name: str) -> bool:
    from importlib.metadata import entry_points

    from ragkit.analysis.defaults import registry_of

    points = {point.name: point for point in entry_points(group=registry_of(kind).group)}
    return name not in points or not points[name].value.startswith("ragkit.")


def test_reading_the_defaults_of_built_ins_imports_no_component():
    import subprocess
    import sys

    code = ("import sys, pandas as pd; from ragkit.analysis.defaults import with_added_defaults; "
            "runs = pd.DataFrame({'run_id': ['a'], 'chunker': ['token'], 'retriever': ['bm25'], "
            "'judge.rerank': ['llm']}); filled = with_added_defaults(runs); "
            "assert filled.loc[0, 'retriever.scope'] == 'all' and filled.loc[0, 'judge.rerank.prefilter'] == "
            "'cross_encoder'; print('llama_index.core' in sys.modules, 'ragkit.chunkers.token' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
