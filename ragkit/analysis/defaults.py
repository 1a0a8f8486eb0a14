"""Options added after a run was written: their default, so old and new runs compare.

A results folder grows: runs written before an option existed have no column for it (or NaN),
while runs written since show its default (``plan.run_row`` writes every parameter). Both are
the same configuration, so before levels and labels are computed each missing value of an
added option is filled with the option's default, where the component or judge applies. A
component type that is not installed here (a plugin) is left as it is.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragkit import registry
from ragkit.judges.base import judges as judge_registry
from ragkit.registry import ConfigError

COMPONENTS = {"chunker": registry.chunkers, "embedder": registry.embedders, "retriever": registry.retrievers}


def with_added_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    runs = runs.copy()
    for kind, kinds in COMPONENTS.items():
        if kind in runs.columns:
            _fill(runs, kind, kinds, applies=runs[kind].notna())
    for column in [c for c in runs.columns if c.startswith("judge.") and c.count(".") == 1]:
        # Only a judge that is on has parameters in effect (run_row writes none for off).
        applies = runs[column].notna() & (runs[column] != "off")
        _fill(runs, column, judge_registry, applies=applies, type_of=lambda _value, name=column[6:]: name)
    return runs


def _fill(runs: pd.DataFrame, kind: str, kinds: Any, applies: pd.Series, type_of: Any = None) -> None:
    for value, index in runs[applies].groupby(kind, sort=False).groups.items():
        name = type_of(value) if type_of is not None else str(value)
        try:
            model = kinds.params_model(name)
        except (ConfigError, KeyError, ValueError):
            continue  # not installed here: nothing to say about its options
        for option in model.added_fields:
            default = model.model_fields[option].get_default(call_default_factory=True)
            if not isinstance(default, (str, bool, int, float)):
                continue  # none stays missing, as run_row writes it; lists are not levels
            column = f"{kind}.{option}"
            if column not in runs.columns:
                runs[column] = pd.Series([pd.NA] * len(runs), index=runs.index, dtype="object")
            missing = [i for i in index if pd.isna(runs.at[i, column])]
            if missing:
                runs[column] = runs[column].astype("object")
                runs.loc[missing, column] = default
