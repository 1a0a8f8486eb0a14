"""`ragkit compare BASELINE NEW --fail-if "ndcg@10 < -0.02"`: a regression gate for CI.

**Comparability first** (``differences``). Two folders are compared only when they asked the
same questions of the same documents with the same models:

- questions: the same question ids, each with the same content key (``question_key`` of the
  ``questions`` table: the question's text and ground truth), else the ids only in one folder
  and those whose content changed are named;
- corpus: each pair of runs has the same ``corpus_id`` (the hash of the documents' bytes);
- models: each pair of runs names the same backend and model for every LLM role
  (``llm.<role>`` of the runs table), and where both runs recorded the model's digest
  (``llm_digest.<role>``: Ollama's digest of the tag, sha256 of a local GGUF; "unknown" for an
  OpenAI-compatible server, and absent in folders written before digests were recorded) the
  digests are equal, so a tag re-pulled between the two runs is named.

A difference refuses the comparison (``ConfigError``, exit 2) unless ``allow_different``.

**Pairing.** A baseline run pairs with the new run of the same run id, else with the new run
whose configuration columns (every runs column but ids, keys, label, experiment, depth and
``llm.*``) are equal, else with the new run equal in every one but the approximate-search index
(``ann.*``: an exact folder against the same grid searched through an ANN index, so the gate
measures what the index costs in quality; the pair's label says so). Runs left unpaired are
listed, not compared.

**The rule.** ``METRIC < T`` (T usually negative: "a drop of more than |T|") fails when, for some
pair, the per-question difference new - baseline is significantly below T; ``METRIC > T`` (for a
lower-is-better rate) when it is significantly above T. The difference is the strict one, over
every question both runs were asked, a failed question counting as the metric's worst value
(``names.failure_value``), so a new version does not pass by crashing. Significance: a one-sided
cluster-robust t test (CR2, ``statistics``' df) of the mean difference against T (H0: mean >= T
for ``<``), over the question's source documents as the unit (``statistics.column_stats``).
Every pair and condition with a t test is one family, adjusted as the report's families are
(``families.adjust``) but one-sided: the step-down minP test, each test oriented to the side
its condition fails on (a draw's extreme is its largest t, not |t|), entering with its one-sided
sign-flip p on 14 documents or more (``families.SIGN_FLIP_UNITS``; else its t test's), the
tests' dependence from a wild bootstrap over the documents they share (Holm above
``families.JOINT_MAX`` tests);
the gate fails when p (adj.) < alpha (0.05). For one pair and condition, p (adj.) is the test's
one-sided restricted wild cluster bootstrap p (``families``: a test alone), which can disagree
with the 90% t interval's bound near alpha; ``p_one_sided`` stays the t test's.

**No spread, one rule** (``statistics.one_sided``): a shift with no spread between units is
decided by its side of the threshold (p 0 or 1, outside the family: no draw moves it). A pair with
one unit has no verdict (UNTESTED, not counted; exit 2 unless something regressed). The text
counts the t tests adjusted, the rows decided by their side and those without a verdict.
**Like with like**: a new run asked fewer questions than its baseline run is refused
(``coverage.stopped_short``) unless ``allow_partial``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ragkit.analysis import families, statistics
from ragkit.analysis.comparison import Comparer
from ragkit.analysis.coverage import stopped_short
from ragkit.analysis.json_rows import json_records
from ragkit.analysis.loading import Results, load_results
from ragkit.analysis.pairing import ANN_KIND, ANN_PREFIX, EXACT_SEARCH, format_value, is_config_column
from ragkit.errors import ConfigError
from ragkit.llms.base import DIGEST_PREFIX, UNKNOWN_DIGEST
from ragkit.metrics.names import failure_value, sort_key

_CONDITION = re.compile(r"^\s*(?P<metric>[A-Za-z0-9_@.]+)\s*(?P<op>[<>])\s*(?P<threshold>[-+]?\d*\.?\d+)\s*$")
SHOWN = 5  # question ids named per kind of difference
FAIL, PASS, REFUSE = 1, 0, 2
T_TEST = statistics.T_TEST
GATE_SAMPLE = "gate"
JOINT = "one-sided step-down joint test (dependence from a wild bootstrap over the shared documents)"
HOLM = f"one-sided Holm (more than {families.JOINT_MAX} tests for the joint test)"


class FailIf(BaseModel):
    """One condition: fail when new - baseline on ``metric`` is significantly ``op`` ``threshold``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str = Field(description="A metric both folders scored.")
    op: str = Field(pattern="^[<>]$", description="'<': fail on a drop below the threshold; '>': on a rise above.")
    threshold: float = Field(ge=-1e6, le=1e6, description="The tolerated difference new - baseline.")

    @classmethod
    def parse(cls, text: str) -> FailIf:
        match = _CONDITION.match(text)
        if match is None:
            raise ConfigError(f"--fail-if '{text}' is not 'METRIC < NUMBER' or 'METRIC > NUMBER', "
                              "e.g. \"ndcg@10 < -0.02\"")
        return cls(metric=match["metric"], op=match["op"], threshold=float(match["threshold"]))

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


def _config_columns(runs: pd.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if is_config_column(c) and not c.startswith("llm."))


def _signature(row: pd.Series, columns: list[str]) -> tuple:
    return tuple("<none>" if pd.isna(row.get(c)) else str(row.get(c)) for c in columns)


def pair_runs(baseline: pd.DataFrame, new: pd.DataFrame) -> tuple[pd.DataFrame, list[str], list[str]]:
    """([base_run, new_run, label, how], unpaired baseline run ids, unpaired new run ids)."""
    columns = sorted(set(_config_columns(baseline)) | set(_config_columns(new)))
    new_ids = set(new["run_id"].astype(str))
    by_signature: dict[tuple, str] = {}
    for _, row in new.iterrows():
        by_signature.setdefault(_signature(row, columns), str(row["run_id"]))
    labels = dict(zip(baseline["run_id"].astype(str), baseline["label"].astype(str) if "label" in baseline
                      else baseline["run_id"].astype(str)))
    # Run ids first (a run id names the configuration and its models), then configurations, then
    # configurations apart from the ANN index.
    partners: dict[str, tuple[str, str]] = {run: (run, "run id") for run in labels if run in new_ids}
    used = {partner for partner, _ in partners.values()}
    for _, row in baseline.iterrows():
        run_id = str(row["run_id"])
        partner = by_signature.get(_signature(row, columns))
        if run_id not in partners and partner is not None and partner not in used:
            partners[run_id] = (partner, "configuration")
            used.add(partner)
    _pair_across_ann_index(baseline, new, [c for c in columns if not c.startswith(ANN_PREFIX)], partners, used)
    for run, (_partner, how) in partners.items():
        if how.startswith("search "):
            labels[run] = f"{labels[run]} [{how}]"
    rows = [{"base_run": run, "new_run": partner, "how": how, "label": labels[run]}
            for run, (partner, how) in sorted(partners.items(), key=lambda item: labels[item[0]])]
    pairs = pd.DataFrame(rows, columns=["base_run", "new_run", "how", "label"])
    unpaired_base = sorted(set(baseline["run_id"].astype(str)) - set(pairs["base_run"]))
    return pairs, unpaired_base, sorted(new_ids - used)


def _pair_across_ann_index(baseline: pd.DataFrame, new: pd.DataFrame, columns: list[str],
                           partners: dict[str, tuple[str, str]], used: set[str]) -> None:
    """Pair the runs left over whose configurations differ in the ANN index alone (``columns``:
    the configuration columns but ``ann.*``), how = "search <baseline's> -> <new's>"."""
    by_signature: dict[tuple, list[pd.Series]] = {}
    for _, row in new.iterrows():
        by_signature.setdefault(_signature(row, columns), []).append(row)
    for _, row in baseline.iterrows():
        run_id = str(row["run_id"])
        if run_id in partners:
            continue
        for partner in by_signature.get(_signature(row, columns), []):  # the first one free and different
            change = _search_change(row, partner)
            if change and str(partner["run_id"]) not in used:
                partners[run_id] = (str(partner["run_id"]), f"search {change}")
                used.add(str(partner["run_id"]))
                break


def _search_change(base: pd.Series, new: pd.Series) -> str:
    """``none -> ivf_hnsw_sq`` (exact to approximate), or the knobs that changed on one index kind:
    ``ivf_hnsw_sq ef none -> 128``; "" when the indexes are the same."""
    def value(row: pd.Series, column: str) -> str:
        found = row.get(column)
        return format_value(found) if column != ANN_KIND or not pd.isna(found) else EXACT_SEARCH

    if value(base, ANN_KIND) != value(new, ANN_KIND):
        return f"{value(base, ANN_KIND)} -> {value(new, ANN_KIND)}"
    knobs = sorted({str(c) for c in [*base.index, *new.index] if str(c).startswith(ANN_PREFIX)} - {ANN_KIND})
    changed = [f"{c.removeprefix(ANN_PREFIX)} {value(base, c)} -> {value(new, c)}" for c in knobs
               if value(base, c) != value(new, c)]
    return f"{value(base, ANN_KIND)} {', '.join(changed)}" if changed else ""


def _question_keys(results: Results) -> pd.Series:
    questions = results.questions
    if questions.empty:
        ids = results.question_ids
        return pd.Series(pd.NA, index=ids.astype(str), dtype="string")
    known = questions.drop_duplicates("question_id")
    return pd.Series(known["question_key"].astype("string").to_numpy(), index=known["question_id"].astype(str))


def _named(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def differences(baseline: Results, new: Results, pairs: pd.DataFrame) -> list[str]:
    """What makes the two folders not comparable, one sentence each (empty: comparable)."""
    found = []
    base_keys, new_keys = _question_keys(baseline), _question_keys(new)
    only_base = sorted(set(base_keys.index) - set(new_keys.index))
    only_new = sorted(set(new_keys.index) - set(base_keys.index))
    common = sorted(set(base_keys.index) & set(new_keys.index))
    changed = [q for q in common if not pd.isna(base_keys[q]) and not pd.isna(new_keys[q])
               and base_keys[q] != new_keys[q]]
    if only_base:
        found.append(f"{len(only_base)} question(s) only in the baseline: {_named(only_base)}")
    if only_new:
        found.append(f"{len(only_new)} question(s) only in the new folder: {_named(only_new)}")
    if changed:
        found.append(f"{len(changed)} question(s) whose text or ground truth changed: {_named(changed)}")
    base_runs = baseline.runs.set_index(baseline.runs["run_id"].astype(str))
    new_runs = new.runs.set_index(new.runs["run_id"].astype(str))
    llm_columns = sorted({c for c in [*base_runs.columns, *new_runs.columns] if str(c).startswith("llm.")})
    digest_columns = sorted({c for c in [*base_runs.columns, *new_runs.columns] if str(c).startswith(DIGEST_PREFIX)})
    for pair in pairs.itertuples():
        a, b = base_runs.loc[pair.base_run], new_runs.loc[pair.new_run]
        if "corpus_id" in a and "corpus_id" in b and str(a["corpus_id"]) != str(b["corpus_id"]):
            found.append(f"{pair.label}: corpus content differs (corpus_id {a['corpus_id']} -> {b['corpus_id']})")
        for column in llm_columns:
            before, after = a.get(column), b.get(column)
            if (pd.isna(before) and pd.isna(after)) or str(before) == str(after):
                continue
            found.append(f"{pair.label}: {column} differs ({before} -> {after})")
        for column in digest_columns:
            before, after = _known_digest(a.get(column)), _known_digest(b.get(column))
            if before is not None and after is not None and before != after:
                role = column.removeprefix(DIGEST_PREFIX)
                found.append(f"{pair.label}: the {role} model's digest differs ({before} -> {after})")
    return found


def _known_digest(value: object) -> str | None:
    """The recorded digest, or None where there is none to compare (not recorded, or "unknown")."""
    if value is None or (not isinstance(value, str) and pd.isna(value)) or str(value) == UNKNOWN_DIGEST:
        return None
    return str(value)


@dataclass
class GateResult:
    conditions: list[FailIf]
    pairs: pd.DataFrame
    unpaired_base: list[str]
    unpaired_new: list[str]
    differences: list[str]
    rows: pd.DataFrame  # per pair x condition: label, means, strict diff, CI, one-sided p, p_adj, regressed
    alpha: float
    partial: list[str] = field(default_factory=list)  # new runs asked fewer questions (allowed)

    @property
    def tests(self) -> int:
        """The t tests the family's adjustment ran over (not the rows decided by their side of the
        threshold, nor those without a p)."""
        return int(_t_tested(self.rows).sum())

    @property
    def decided(self) -> int:
        """Rows with no spread between units, decided by the mean's side of the threshold."""
        return int((self.rows["p_one_sided"].notna() & (self.rows["decided_by"] != T_TEST)).sum())

    @property
    def untested(self) -> int:
        """Rows without a verdict (fewer than two units)."""
        return int(self.rows["p_one_sided"].isna().sum())

    @property
    def method(self) -> str:
        return JOINT if self.tests <= families.JOINT_MAX else HOLM

    @property
    def exit_code(self) -> int:
        """1 on a regression; else 2 when some pair could not be tested (no verdict); else 0."""
        if bool(self.rows["regressed"].any()):
            return FAIL
        return REFUSE if self.untested else PASS


def _combined(baseline: Results, new: Results, pairs: pd.DataFrame, metrics: list[str]) -> Results:
    """One Results holding both folders' paired runs, their ids prefixed ``base:`` and ``new:`` (a
    run id is the same in both folders when nothing changed)."""
    runs, scores = [], []
    for prefix, results, column in (("base:", baseline, "base_run"), ("new:", new, "new_run")):
        mine = results.runs[results.runs["run_id"].astype(str).isin(pairs[column])]
        runs.append(mine[["run_id"]].assign(run_id=prefix + mine["run_id"].astype(str)))
        rows = results.scores_of(metrics)
        rows = rows[rows["run_id"].astype(str).isin(pairs[column])]
        scores.append(pd.DataFrame({"run_id": prefix + rows["run_id"].astype(str), "question_id":
                                    rows["question_id"].astype(str), "metric": rows["metric"].astype(str),
                                    "value": rows["value"].to_numpy(dtype="float64"),
                                    "error": rows["error"].astype("string")}))
    questions = pd.concat([baseline.questions.reindex(columns=["question_id", "document"]),
                           new.questions.reindex(columns=["question_id", "document"])]).drop_duplicates("question_id")
    return Results(pd.concat(runs, ignore_index=True).assign(label=lambda f: f["run_id"]),
                   pd.concat(scores, ignore_index=True), questions=questions)


def gate(baseline: Results, new: Results, conditions: list[FailIf], allow_different: bool = False,
         alpha: float = 0.05, allow_partial: bool = False) -> GateResult:
    """The gate of the module docstring; a ConfigError when the folders differ (unless allowed), a
    new run was asked fewer questions than its baseline (unless ``allow_partial``), a condition
    names an unscored metric, or no run pairs."""
    scored = set(baseline.metric_names) & set(new.metric_names)
    for condition in conditions:
        if condition.metric not in scored:
            raise ConfigError(f"--fail-if metric '{condition.metric}' is not scored in both folders. "
                              f"Valid metrics: {', '.join(sorted(scored, key=sort_key)) or '(none)'}")
    pairs, unpaired_base, unpaired_new = pair_runs(baseline.runs, new.runs)
    if pairs.empty:
        raise ConfigError("no run of the new folder has the run id or configuration of a baseline run: "
                          "nothing to compare")
    found = differences(baseline, new, pairs)
    if found and not allow_different:
        raise ConfigError("the folders are not comparable: " + "; ".join(found)
                          + ". Add --allow-different to compare them anyway")
    metrics = list(dict.fromkeys(c.metric for c in conditions))
    comparer = Comparer(_combined(baseline, new, pairs, metrics), depth_rule="asked")
    matrices = comparer.matrices
    matrices.load(metrics)  # first: a question only one folder has grows the matrices
    units = comparer.units
    positions = pd.Index(matrices.run_ids)
    base_at = positions.get_indexer("base:" + pairs["base_run"])
    new_at = positions.get_indexer("new:" + pairs["new_run"])
    partial = [line for metric in metrics for line in stopped_short(pairs, matrices.get(metric)[1], base_at, new_at,
                                                                    metric)]
    if partial and not allow_partial:
        raise ConfigError("a new run stopped short: " + "; ".join(partial)
                          + ". Add --allow-partial to compare on the questions both were asked")
    frames: list[pd.DataFrame] = []
    influences: list[families.FamilyTest] = []  # per row, oriented to the side it tests
    for condition in conditions:
        values, asked = matrices.get(condition.metric)
        worst = failure_value(condition.metric)
        strict = np.where(asked, np.nan_to_num(values, nan=worst), np.nan)
        both = asked[:, base_at] & asked[:, new_at]
        diffs = np.where(both, strict[:, new_at] - strict[:, base_at], np.nan)
        # At 90%, the interval's bound on the side tested is the one-sided 95% bound of the rule.
        column = statistics.column_stats(diffs - condition.threshold, units, confidence=1 - 2 * alpha)
        p_one, how = statistics.one_sided(column, condition.op)
        counted = both.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):  # a pair with no question in common: NaN means
            means = [np.where(counted > 0, np.where(both, strict[:, at], 0.0).sum(axis=0) / counted, np.nan)
                     for at in (base_at, new_at)]
        # The influence is the same for diffs and diffs - T; negated for "<" so that every test of
        # the family rejects on its influence's large side (``families.joint_adjust``, one-sided).
        direction = -1.0 if condition.op == "<" else 1.0
        influences.extend(families.FamilyTest(GATE_SAMPLE, influence, share, direction * mean, df)
                          for influence, share, mean, df in zip(direction * statistics.unit_influence(diffs, units).T,
                                                                statistics.unit_shares(diffs, units).T,
                                                                column.mean, column.df))
        frames.append(pd.DataFrame({
            "label": pairs["label"], "base_run": pairs["base_run"], "new_run": pairs["new_run"],
            "condition": str(condition), "n": column.n, "n_units": column.n_units, "df": column.df,
            "baseline": means[0], "new": means[1],
            "diff": column.mean + condition.threshold, "ci_low": column.ci_low + condition.threshold,
            "ci_high": column.ci_high + condition.threshold, "p_one_sided": p_one, "decided_by": how,
        }))
    rows = pd.concat(frames, ignore_index=True)
    rows["p_adj"] = adjust(rows, influences, alpha)
    rows["regressed"] = rows["p_adj"] < alpha
    return GateResult(conditions, pairs, unpaired_base, unpaired_new, found, rows, alpha, partial)


def adjust(rows: pd.DataFrame, tests: list[families.FamilyTest], alpha: float) -> np.ndarray:
    """The gate's adjusted p per row, over the rows decided by a t test: one such row alone, its
    one-sided wild bootstrap p; several, the one-sided joint test of their sign-flip (or t tests')
    p (``families.adjust``; Holm above ``families.JOINT_MAX`` of them). A row decided by its
    side of the threshold keeps its p (0 or 1: no draw of a test without spread can move it); NaN
    stays."""
    p = rows["p_one_sided"].to_numpy(dtype="float64")
    adjusted = p.copy()
    tested = np.flatnonzero(_t_tested(rows))
    if len(tested):
        # One sample: every pair's differences sit in one matrix over the same units.
        adjusted[tested] = families.adjust(p[tested], [tests[i] for i in tested], alpha, one_sided=True).adjusted
    return adjusted


def _t_tested(rows: pd.DataFrame) -> np.ndarray:
    return (rows["decided_by"] == T_TEST).to_numpy() & rows["p_one_sided"].notna().to_numpy()


def selection_differences(runs: pd.DataFrame) -> list[str]:
    """What the Compare page warns about in one folder's selected runs: more than one question set
    or corpus (comparisons then use the questions both runs were asked, of different documents),
    more than one evaluation model (generation metrics judged by different judges), or one model
    name for a role with more than one recorded digest (a tag re-pulled between runs)."""
    found = []
    for column, what in (("questions_key", "question sets"), ("corpus_id", "corpora"),
                         ("llm.evaluation", "evaluation models")):
        if column in runs.columns and runs[column].dropna().nunique() > 1:
            values = runs[column].dropna().astype(str).unique()
            found.append(f"the selected runs use {len(values)} {what} ({', '.join(values[:SHOWN])})")
    for column in sorted(c for c in runs.columns if str(c).startswith(DIGEST_PREFIX)):
        role = column.removeprefix(DIGEST_PREFIX)
        model_column = f"llm.{role}"
        if model_column not in runs.columns:
            continue
        # Runs naming the same model for a role whose digests differ: the tag was re-pulled
        # between them. Different models are a factor being compared, not a warning.
        for model, group in runs.groupby(runs[model_column].astype("string"), dropna=True):
            digests = sorted({d for d in map(_known_digest, group[column]) if d is not None})
            if len(digests) > 1:
                found.append(f"the selected runs' {role} model {model} has {len(digests)} digests "
                             f"({', '.join(digests[:SHOWN])}): it was re-pulled between runs")
    return found


def run_gate(baseline_dir: str | Path, new_dir: str | Path, conditions: list[str], allow_different: bool = False,
             fmt: str = "text", allow_partial: bool = False) -> tuple[str, int]:
    """(what to print, exit code) for `ragkit compare`."""
    if fmt not in ("text", "json"):
        raise ConfigError(f"unknown format '{fmt}'. Valid formats: text, json")
    if not conditions:
        raise ConfigError("give at least one --fail-if condition, e.g. --fail-if \"ndcg@10 < -0.02\"")
    parsed = [FailIf.parse(text) for text in conditions]
    result = gate(load_results(baseline_dir), load_results(new_dir), parsed, allow_different,
                  allow_partial=allow_partial)
    return (to_json(result) if fmt == "json" else to_text(result)), result.exit_code


def to_json(result: GateResult) -> str:
    return json.dumps({
        "conditions": [str(c) for c in result.conditions], "alpha": result.alpha,
        "rule": "one-sided cluster-robust t (CR2, Satterthwaite df) of the strict difference new - baseline "
                f"against the threshold; p_adj: {result.method} over every pair and condition with a t test "
                f"({families.DRAWS} draws, fixed seed); no spread between units: the mean's side decides (p 0 or "
                "1, not adjusted)",
        "adjustment": result.method, "tests": result.tests, "decided_by_side": result.decided,
        "untested": result.untested,
        "differences_allowed": result.differences, "partial_runs_allowed": result.partial,
        "unpaired_baseline_runs": result.unpaired_base,
        "unpaired_new_runs": result.unpaired_new, "regressed": bool(result.rows["regressed"].any()),
        "rows": json_records(result.rows),
    }, indent=1) + "\n"


def to_text(result: GateResult) -> str:
    extra = [f"{result.decided} decided by their side of the threshold"] if result.decided else []
    extra += [f"{result.untested} without a verdict: see below"] if result.untested else []
    lines = [f"{len(result.pairs)} run pair(s); strict difference new - baseline (a failure counts as the worst "
             f"value); one-sided t test against the threshold, adjusted by the {result.method} over the "
             f"{result.tests} t test(s)" + (f" ({'; '.join(extra)})" if extra else "")
             + f", alpha {result.alpha:g}; [90% CI]:"]
    for row in result.rows.itertuples():
        verdict = "REGRESSED" if row.regressed else ("UNTESTED" if np.isnan(row.p_one_sided) else "ok")
        spread = "" if row.decided_by == T_TEST else f" ({row.decided_by})"
        lines.append(f"  {verdict:9} {row.label} [{row.condition}]: {row.baseline:.3f} -> {row.new:.3f}, "
                     f"diff {row.diff:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}], p (one-sided) "
                     f"{row.p_one_sided:.3g}, p (adj.) {row.p_adj:.3g}, n {row.n} in {row.n_units} units{spread}")
    for what in result.differences:
        lines.append(f"  warning (allowed): {what}")
    for what in result.partial:
        lines.append(f"  warning (allowed): {what}")
    if result.unpaired_base or result.unpaired_new:
        lines.append(f"  not compared: {len(result.unpaired_base)} baseline and {len(result.unpaired_new)} new "
                     "run(s) without a partner")
    if result.exit_code == FAIL:
        lines.append("regression: exit 1")
    elif result.exit_code == REFUSE:
        lines.append(f"no verdict: {result.untested} comparison(s) could not be tested (exit 2)")
    else:
        lines.append("no significant regression")
    return "\n".join(lines) + "\n"
