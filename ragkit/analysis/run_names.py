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


def labels_by_run(runs: pd.DataFrame) -> dict[str, str]:
    """run id -> label, as `ragkit summary` prints it (the id itself where the runs table holds no
    configuration columns to name it by)."""
    ids = runs["run_id"].astype(str).tolist()
    if "label" in runs.columns:
        return dict(zip(ids, runs["label"].astype(str)))
    if {*COMPONENT_KINDS, "top_k"} <= set(runs.columns):
        return dict(zip(ids, run_labels(runs).astype(str)))
    return dict(zip(ids, ids))


MIN_ID_PREFIX = 4  # shorter prefixes would let a typo pick a run by chance


def resolve_runs(runs: pd.DataFrame, given: str, option: str = "--runs") -> list[str]:
    """Run ids of a comma-separated list of run references: each a run's label (as `ragkit
    summary` prints it), its whole id, or a unique prefix of its id of at least
    ``MIN_ID_PREFIX`` characters. A label holding commas ("token(chunk_size=256, overlap=20)")
    is matched whole before the text is split. A reference that matches no run, or several,
    is a ConfigError naming the runs to choose from. Order follows ``given``; repeats are dropped."""
    from ragkit.errors import ConfigError

    named = labels_by_run(runs)
    ids, labels = list(named), list(named.values())
    choices = "; ".join(f"{run_id} ({label})" for run_id, label in sorted(zip(ids, labels), key=lambda p: p[1]))

    def matches(reference: str) -> list[str]:
        by_label = [run_id for run_id, label in zip(ids, labels) if label == reference]
        if by_label:
            return by_label
        if len(reference) >= MIN_ID_PREFIX or reference in ids:
            return [run_id for run_id in ids if run_id.startswith(reference)]
        return []

    pieces = [piece.strip() for piece in given.split(",")]
    found: list[str] = []
    start = 0
    while start < len(pieces):
        # The longest run of pieces that is a whole label (labels join parameters with ", ").
        end = next((end for end in range(len(pieces), start + 1, -1) if ", ".join(pieces[start:end]) in labels),
                   start + 1)
        reference = ", ".join(pieces[start:end])
        start = end
        if not reference:
            continue
        matched = matches(reference)
        if not matched:
            raise ConfigError(f"{option} '{reference}' matches no run (a label, a run id or an id prefix of "
                              f"{MIN_ID_PREFIX}+ characters). Valid runs: {choices or '(none)'}")
        if len(matched) > 1:
            which = "; ".join(f"{run_id} ({labels[ids.index(run_id)]})" for run_id in matched)
            raise ConfigError(f"{option} '{reference}' matches {len(matched)} runs: {which}. "
                              "Give a run id (or more of it)")
        if matched[0] not in found:
            found.append(matched[0])
    return found
