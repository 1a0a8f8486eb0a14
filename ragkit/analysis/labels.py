"""Short readable names for runs, e.g. "token(chunk_size=256) · minilm · bm25 · k=5"."""

from __future__ import annotations

import pandas as pd

COMPONENT_KINDS = ("chunker", "embedder", "retriever")


def _value(value: object) -> str:
    """A parameter as written: a missing one (an option left at none) reads "none", 60.0 reads 60."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def run_labels(runs: pd.DataFrame) -> pd.Series:
    """Short readable names, e.g. "token(chunk_size=256) · minilm · bm25 · k=5".

    Only parameters that differ between runs of the same component type are shown, so labels
    stay short yet tell every run apart.
    """
    varying: dict[tuple[str, str], list[str]] = {}
    for kind in COMPONENT_KINDS:
        columns = [c for c in runs.columns if c.startswith(f"{kind}.") and c != f"{kind}.top_k"]
        for component, group in runs.groupby(kind, dropna=False):
            varying[(kind, component)] = [
                c for c in columns if group[c].astype("string").nunique(dropna=False) > 1
            ]

    def label(row: pd.Series) -> str:
        parts = []
        for kind in COMPONENT_KINDS:
            component = row[kind]
            if pd.isna(component):
                parts.append("-")
                continue
            shown = [f"{c.split('.', 1)[1]}={_value(row[c])}" for c in varying.get((kind, component), [])]
            parts.append(f"{component}({', '.join(shown)})" if shown else str(component))
        parts.append(f"k={row['top_k']}")
        # Judges that are off are left out, so a judge-free run reads as plain retrieval; a
        # judge's parameters are shown when they differ between runs in the same mode (a
        # toggled option such as groundedness on_fail).
        for column in judge_columns:
            mode = row[column]
            if pd.isna(mode) or mode == "off":
                continue
            shown = [f"{c.rsplit('.', 1)[1]}={_value(row[c])}" for c in varying.get((column, mode), [])]
            parts.append(f"+{column.split('.', 1)[1]}({', '.join([str(mode), *shown])})")
        if bool(row.get("generator", False)) is True:
            parts.append("+answers")
        return " · ".join(parts)

    judge_columns = sorted(c for c in runs.columns if c.startswith("judge.") and c.count(".") == 1)
    for column in judge_columns:
        params = [c for c in runs.columns if c.startswith(f"{column}.") and c.count(".") == 2]
        for mode, group in runs.groupby(column, dropna=True):
            varying[(column, mode)] = [c for c in params if group[c].astype("string").nunique(dropna=False) > 1]

    return runs.apply(label, axis=1) if not runs.empty else pd.Series(dtype="string")
