"""Which runs differ in exactly one factor, and what each run's level of every factor is.

A *factor* is a group of config columns of the runs table (see ``factor_columns``): a component
with its parameters (`retriever` with `retriever.rrf_k`), a judge with its parameters and model,
`top_k`. A run's *level* of a factor is a short label of those columns, e.g. ``token(chunk_size=256)``
or ``llm``; it is missing when the factor does not apply to the run (a bm25 run has no embedder).

Fair pairs: two runs pair on factor F when their levels of F differ and every other factor is
equal *or does not apply to one of them*, so a bm25 run pairs with the dense and hybrid runs
of the same chunker and k whatever embedder those use.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragkit.llms.base import DIGEST_PREFIX

# runs columns that identify a run or follow from its configuration rather than configure it:
# `depth` (the most chunks the final context holds) follows from top_k and the judges.
NON_CONFIG_COLUMNS = frozenset({"run_id", "label", "experiment", "depth"})
TOP_K = "top_k"
JUDGE_PREFIX = "judge."
# The approximate-search index (``ann.*`` columns): the plan writes them only on runs whose index
# is approximate; a run with an embedder and no ``ann.kind`` searched exactly, level EXACT_SEARCH.
ANN_KIND, ANN_PREFIX, EMBEDDER, EXACT_SEARCH = "ann.kind", "ann.", "embedder", "none"
# Modes a judge can run in, baseline first: a pair reads "off -> heuristic", "heuristic -> llm".
_MODE_ORDER = {"off": 0, "heuristic": 1, "llm": 2, "cross_encoder": 3, "nli": 4}
PAIR_COLUMNS = ["run_a", "run_b", "factor", "value_a", "value_b"]


def is_config_column(column: str) -> bool:
    """A runs column that configures the run: not an id or key, and not ``llm_digest.<role>``
    (what a model name pointed at when the run executed, a fact about the models, not a choice)."""
    return (column not in NON_CONFIG_COLUMNS and not column.endswith("_id") and not column.endswith("_key")
            and not column.startswith(DIGEST_PREFIX))


def factor_columns(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Config columns grouped into factors, the factor's main column first.

    A dotted column belongs to the longest dotted prefix that is itself a column, so a
    component's type and its parameters form one factor (`retriever` with `retriever.rrf_k`).
    `<kind>.top_k` mirrors the `top_k` column and joins that factor. `llm.<role>` names the
    model behind a role and joins that role's factor (`judge.<role>`, or `<role>` such as
    `generator`): it is set exactly when the role calls an LLM, so switching a judge to llm mode
    still pairs as one factor. `ann.<param>` joins `ann.kind` (an index kind with its knobs).
    A dotted column with no such prefix is a factor on its own.
    """
    config = [c for c in runs.columns if is_config_column(c)]
    names = set(config)
    factors: dict[str, list[str]] = {}
    for column in config:
        factor = column
        if column.endswith(".top_k") and TOP_K in names:
            factor = TOP_K
        elif column.startswith("llm."):
            role = column.removeprefix("llm.")
            factor = next((owner for owner in (f"{JUDGE_PREFIX}{role}", role) if owner in names), column)
        elif column.startswith(ANN_PREFIX) and ANN_KIND in names:
            factor = ANN_KIND
        else:
            parts = column.split(".")
            for length in range(len(parts) - 1, 0, -1):
                prefix = ".".join(parts[:length])
                if prefix in names:
                    factor = prefix
                    break
        factors.setdefault(factor, []).append(column)
    return {factor: sorted(columns, key=lambda c: c != factor) for factor, columns in factors.items()}


def format_value(value: object) -> str:
    # A parameter column holding NaN for some runs turns 60 into 60.0; show it as written. A
    # parameter set to none (an option off) is stored as a missing value.
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "none"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _param_name(column: str) -> str:
    return "llm" if column.startswith("llm.") else column.split(".")[-1]


def _factor_levels(runs: pd.DataFrame, columns: list[str]) -> pd.Series:
    """Each run's level of one factor: its main value, with the parameters that vary among the
    runs sharing that main value; None where the main column is missing (not applicable)."""
    main, params = columns[0], [c for c in columns[1:] if not c.endswith(".top_k")]
    labels = np.full(len(runs), None, dtype=object)
    applies = np.flatnonzero(runs[main].notna().to_numpy())
    mains = runs[main].astype("string").to_numpy()[applies]
    for _value, members in pd.Series(applies).groupby(mains, sort=False):
        at = members.to_numpy()
        group = runs.iloc[at]
        varying = [c for c in params if group[c].astype("string").nunique(dropna=False) > 1]
        # Filled by position: setting a label per run through pandas indexing costs tens of microseconds.
        labels[at] = [_level_label(value, varying, shown_values)
                      for value, *shown_values in group[[main, *varying]].itertuples(index=False, name=None)]
    return pd.Series(labels, index=runs.index, dtype="object")


def _level_label(value: object, varying: list[str], shown_values: list[object]) -> str:
    shown = ", ".join(f"{_param_name(c)}={format_value(v)}" for c, v in zip(varying, shown_values))
    return f"{format_value(value)}({shown})" if shown else format_value(value)


def _exact_search_named(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``ann.kind`` set to EXACT_SEARCH on runs that search vectors exactly, so an
    exact run pairs with an approximate one; runs without an embedder keep it missing (no vectors:
    the index kind does not apply). Its missing value still sorts first, so exact is the baseline."""
    if ANN_KIND not in runs.columns or EMBEDDER not in runs.columns:
        return runs
    exact = runs[ANN_KIND].isna() & runs[EMBEDDER].notna()
    if not exact.any():
        return runs
    named = runs.copy()
    named[ANN_KIND] = named[ANN_KIND].astype(object).where(~exact, EXACT_SEARCH)
    return named


def factor_levels(runs: pd.DataFrame) -> pd.DataFrame:
    """runs x factors: each run's level label of each factor (None: does not apply); index run_id."""
    runs = _exact_search_named(runs.reset_index(drop=True))
    factors = factor_columns(runs)
    table = pd.DataFrame({factor: _factor_levels(runs, columns) for factor, columns in factors.items()},
                         index=runs.index)
    return table.set_axis(runs["run_id"].astype(str).to_numpy())


def sort_value(value: object) -> tuple:
    """Baseline first: missing (the component is absent), then False before True and smaller
    numbers first, then judge modes off < heuristic < llm, then other names alphabetically."""
    if not isinstance(value, str) and pd.isna(value):
        return (0, 0.0, "")
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return (1, float(value), "")
    return (2, float(_MODE_ORDER.get(str(value), len(_MODE_ORDER))), str(value))


def level_order(runs: pd.DataFrame, levels: pd.DataFrame, factor: str) -> dict[str, tuple]:
    """Sort key of each level label of ``factor`` (``levels`` from factor_levels(runs)): by its
    main column, then its parameters in column order (sort_value each), then the label."""
    columns = factor_columns(runs)[factor]
    keys: dict[str, tuple] = {}
    for level, row in zip(levels[factor], runs[columns].itertuples(index=False, name=None)):
        if level is not None and level not in keys:
            keys[level] = (*(sort_value(value) for value in row), level)
    return keys


def single_factor_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairs of runs whose levels differ in exactly one factor, a factor that does not apply to
    either run counting as equal. In each pair run_a is the baseline, so b - a reads as "turning
    it on": the smaller level by its main column (missing first, False before True, 5 before 10,
    judge modes off < heuristic < llm, other names alphabetically), then by its label."""
    if len(runs) < 2:
        return pd.DataFrame({c: pd.Series(dtype="string") for c in PAIR_COLUMNS})
    runs = runs.reset_index(drop=True)
    levels = factor_levels(runs)
    names = list(levels.columns)
    codes = np.column_stack([pd.factorize(levels[f].to_numpy(dtype=object), use_na_sentinel=True)[0]
                             for f in names])
    applies = codes >= 0
    differs = (codes[:, None, :] != codes[None, :, :]) & applies[:, None, :] & applies[None, :, :]
    first, second = np.nonzero(np.triu(differs.sum(axis=2) == 1, k=1))
    factor = np.argmax(differs[first, second], axis=1)
    # Each level's rank in its factor's order (level_order): comparing ranks is comparing sort keys.
    ranks = np.full(codes.shape, -1)
    for column, name in enumerate(names):
        order = level_order(runs, levels, name)
        rank = {level: position for position, level in enumerate(sorted(order, key=order.__getitem__))}
        ranks[:, column] = [rank.get(level, -1) for level in levels[name]]
    swap = ranks[second, factor] < ranks[first, factor]
    a, b = np.where(swap, second, first), np.where(swap, first, second)
    values, run_ids = levels.to_numpy(dtype=object), runs["run_id"].to_numpy(dtype=object)
    return pd.DataFrame({"run_a": run_ids[a], "run_b": run_ids[b], "factor": np.asarray(names, dtype=object)[factor],
                         "value_a": values[a, factor], "value_b": values[b, factor]}, columns=PAIR_COLUMNS)
