"""The labels' tables as the report, the CLI and the Compare page show them (one place for all).

``label_sections(root, scores)`` is empty when the folder has no labels, so a report of a
folder without labels is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ragkit.labels.agreement import DEFAULT_RESAMPLES, LEVEL, MIN_CLUSTERS, Agreement
from ragkit.labels.grades import GradeSource
from ragkit.labels.judge_vs_human import ANSWER_METRICS, answer_agreements, prediction_powered, relevance_agreements
from ragkit.labels.pooling import Pool
from ragkit.labels.store import JUDGE, LabelStore

AGREEMENT_NOTE = (
    "Judge against people on the items both labelled. kappa: Cohen's (scikit-learn, unweighted) of the judge "
    "against the people's low-median label; alpha: Krippendorff's (krippendorff package) over every person and the "
    "judge, shown when several people labelled, with the people's own alpha as the ceiling. CIs: 95% percentile, "
    "cluster bootstrap over the questions' source documents ({resamples} resamples; 'used': those where kappa is "
    "defined). bias: judge mean - human mean on the label's scale (relevance 0-2; answers 0-1). Relevance judge "
    "grades 0-3 map to 0 0 1 2; an answer metric's value is grounded at >= 0.5 and correct/partly/wrong as the "
    "nearest of 1/0.5/0. judge:rerank / judge:retrieval: the pipeline's LLM rerank and Retrieval Judge, a chunk "
    "kept (relevant) or dropped against a person's grade partly or relevant (>= 1) or not; chunks matched by span "
    "through the retrievals table; invalid replies left out and counted. grades: how many items each side put in "
    "each category (the relevance judge's own 0-3 grades); a side that used one category only makes kappa 0 by "
    "construction, so the row reads 'cannot be measured'. reading 'CIs rough': fewer than {min_clusters} documents "
    "to resample.")
PPI_NOTE = (
    "Means on the people's scale: judge only (the judge's own mean, biased by its bias), human only (the labelled "
    "questions), PPI (judge mean on all questions + mean of human - judge on the labelled ones) and PPI++ (lambda "
    "tuned to minimise the variance, clipped to [0, 1]); 95% normal CIs, questions treated as independent, the "
    "labelled questions assumed a random subset. pool_precision@k: share of a run's pooled top-k chunks graded "
    "partly or relevant, judge grades vs people's.")


@dataclass
class LabelTables:
    agreements: list[Agreement] = field(default_factory=list)
    ppi: pd.DataFrame = field(default_factory=pd.DataFrame)
    labels: int = 0
    resamples: int = DEFAULT_RESAMPLES

    @property
    def empty(self) -> bool:
        return self.labels == 0


def label_tables(root: str | Path, scores: pd.DataFrame | None = None, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = 0) -> LabelTables:
    """Agreement and PPI tables of a results folder's labels; ``scores`` (default: read, the LLM-scored
    answer metrics only) are where the answer metrics' judge values come from."""
    store = LabelStore(root)
    labels = store.current()
    if labels.empty:
        return LabelTables()
    if scores is None:
        from ragkit.results import ResultStore

        scores = ResultStore(store.root).read("scores", metrics=list(ANSWER_METRICS))
    agreements = []
    agreements += relevance_agreements(labels, resamples, seed)
    agreements += answer_agreements(labels, scores, resamples, seed)
    agreements += _chunk_judges(store.root, labels, resamples, seed)
    pool = store.latest_pool()
    ppi = prediction_powered(labels, scores, pool)
    return LabelTables(agreements, ppi, len(labels), resamples)


def _chunk_judges(root: str | Path, labels: pd.DataFrame, resamples: int, seed: int) -> list[Agreement]:
    """The pipeline's rerank and Retrieval Judge decisions against people's chunk grades."""
    from ragkit.labels.judge_decisions import CHUNK_JUDGES, chunk_judge_agreements
    from ragkit.results import ResultStore

    results = ResultStore(root)
    judgements = results.read("judgements", columns=["run_id", "question_id", "judge", "decision", "valid"])
    if judgements.empty or not judgements["judge"].isin(CHUNK_JUDGES).any():
        return []
    retrievals = results.read("retrievals", columns=["chunk_id", "doc_id", "start_char", "end_char"])
    return chunk_judge_agreements(labels, judgements, retrievals, resamples, seed)


def _num(value: float, digits: int = 3, signed: bool = False) -> str:
    if pd.isna(value):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _ci(low: float, high: float, signed: bool = False) -> str:
    return "-" if pd.isna(low) or pd.isna(high) else f"[{_num(low, signed=signed)}, {_num(high, signed=signed)}]"


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{name}:{count}" for name, count in counts.items()) or "-"


def reading(agreement: Agreement) -> str:
    """The agreement row's short verdict on whether its figures can be read (the notes say why)."""
    flags = []
    if not agreement.readable:
        flags.append("cannot be measured")
    if agreement.n_units < MIN_CLUSTERS:
        flags.append(f"CIs rough ({agreement.n_units} < {MIN_CLUSTERS} documents)")
    return "; ".join(flags) or "ok"


def agreement_table(tables: LabelTables) -> pd.DataFrame:
    return pd.DataFrame([{
        "decision": a.decision, "items / documents": f"{a.n_items} / {a.n_units}", "people": a.annotators,
        "people's grades": _counts(a.human_counts), "judge's grades": _counts(a.judge_scale or a.judge_counts),
        "accuracy": _num(a.accuracy), "kappa [95% CI]": f"{_num(a.kappa)} {_ci(*a.kappa_ci)}",
        "alpha [95% CI]": f"{_num(a.alpha)} {_ci(*a.alpha_ci)}" if a.annotators > 1 else "-",
        "people's alpha": _num(a.human_alpha) if a.annotators > 1 else "-",
        "bias [95% CI]": f"{_num(a.bias, signed=True)} {_ci(*a.bias_ci, signed=True)}",
        "resamples used": f"{a.resamples_used}/{a.resamples}",
        "invalid left out": str(a.left_out),
        "reading": reading(a),
    } for a in tables.agreements])


def agreement_caption(tables: LabelTables) -> str:
    """What the agreement table's columns mean."""
    return AGREEMENT_NOTE.format(resamples=tables.resamples, min_clusters=MIN_CLUSTERS)


def agreement_notes(tables: LabelTables) -> list[str]:
    """Every agreement's warnings (a judge or the people using one grade only, too few documents
    for the CIs, invalid replies left out), as sentences to show before the table."""
    return [note for agreement in tables.agreements for note in agreement.notes()]


def ppi_text_table(tables: LabelTables) -> pd.DataFrame:
    ppi = tables.ppi
    if ppi.empty:
        return ppi
    return pd.DataFrame({
        "run": ppi["run_id"], "metric": ppi["metric"], "people's label": ppi["label"], "estimator": ppi["estimator"],
        f"mean [{int(LEVEL * 100)}% CI]": [f"{_num(m)} {_ci(lo, hi)}" for m, lo, hi in
                                           zip(ppi["mean"], ppi["ci_low"], ppi["ci_high"])],
        "labelled / all": [f"{a}/{b}" for a, b in zip(ppi["n_labelled"], ppi["n_all"])],
        "lambda": ppi["lam"].map(lambda v: _num(v, 2)),
    })


def pool_metric_means(pool: Pool, labels: pd.DataFrame, grades: GradeSource = "combined") -> pd.DataFrame:
    """Per run: the mean pool_precision@k over the questions whose pooled chunks are all graded,
    how many questions that is of the run's pooled ones, whose grades it used (questions graded by
    people only, by the judge only, or both), the judge's invalid replies on the run's pooled
    chunks, and a ``flag`` where the row cannot be compared as it stands: fewer questions than
    another run, or grades that cannot rank runs (``ranking_problem``)."""
    from ragkit.labels.judge_vs_human import pool_metrics

    columns = ["run", "metric", "mean", "questions", "grades", "invalid replies", "flag"]
    labels = labels[labels["pool_id"] == pool.pool_id]
    per_question = pool_metrics(pool, labels, grades)
    if per_question.empty:
        return pd.DataFrame(columns=columns)
    invalid = _invalid_judge_items(labels)
    problem = ranking_problem(pool, labels, grades)
    rows = []
    for (run_id, metric), group in per_question.groupby(["run_id", "metric"], sort=True):
        pooled = [q for q in pool.questions if any(run_id in chunk.runs for chunk in q.chunks)]
        run_items = {(q.question_id, c.item_id) for q in pooled for c in q.chunks if run_id in c.runs}
        mix = group["grades"].value_counts()
        rows.append({"run": run_id, "metric": metric, "mean": round(float(group["value"].mean()), 3),
                     "questions": f"{len(group)} of {len(pooled)}",
                     "grades": ", ".join(f"{source} {count}" for source, count in sorted(mix.items())),
                     # people's grades alone: no judge reply was used, valid or not
                     "invalid replies": len(run_items & invalid) if grades != "human" else "-",
                     "scored": len(group)})
    table = pd.DataFrame(rows)
    most = int(table["scored"].max())
    table["flag"] = [_flag(scored, most, problem) for scored in table["scored"]]
    return table[columns]


def _flag(scored: int, most: int, problem: str | None) -> str:
    flags = [f"fewer questions ({scored} vs {most})"] if scored < most else []
    if problem:
        flags.append("not a ranking")
    return "; ".join(flags)


def _invalid_judge_items(labels: pd.DataFrame) -> set[tuple[str, str]]:
    """(question_id, item_id) of chunks whose latest judge reply was invalid (no grade)."""
    judged = labels[(labels["source"] == JUDGE) & (labels["item_kind"] == "chunk")]
    bad = judged[~judged["valid"].fillna(False).astype(bool)]
    return set(zip(bad["question_id"], bad["item_id"]))


def ranking_problem(pool: Pool, labels: pd.DataFrame, grades: GradeSource = "combined") -> str | None:
    """Why pool_precision from these grades cannot rank runs, in words; None when it can. It cannot
    when the judge whose grades are used gave one grade to every chunk, or when every grade used
    falls on one side of 'relevant' (every run then scores the same by construction)."""
    from ragkit.labels.grades import chunk_grades, judge_grades
    from ragkit.labels.judge_vs_human import RELEVANT_FROM

    labels = labels[(labels["pool_id"] == pool.pool_id) & (labels["item_kind"] == "chunk")]
    used = chunk_grades(labels, grades)
    if used.empty:
        return None
    reasons = []
    judged = used[used["grade_source"] == JUDGE]
    if not judged.empty:
        raw = judge_grades(labels).merge(judged[["question_id", "item_id"]], on=["question_id", "item_id"])
        if raw["judge_grade"].nunique() == 1:
            reasons.append(f"the judge gave {int(raw['judge_grade'].iloc[0])} to every chunk it graded "
                           f"({len(raw)}): its grades tell no run apart")
    relevant = used["relevance"] >= RELEVANT_FROM
    if relevant.nunique() == 1:
        side = "relevant" if bool(relevant.iloc[0]) else "not relevant"
        reasons.append(f"every graded chunk counts as {side}, so every run's pool_precision@{pool.k} is "
                       f"{1.0 if bool(relevant.iloc[0]) else 0.0} by construction")
    return "; ".join(reasons) if reasons else None


def label_sections(tables: LabelTables) -> list[tuple[str, pd.DataFrame, str]]:
    """(title, table, note) for the report; none without labels."""
    if tables.empty:
        return []
    warnings = "\n".join(f"Warning: {note}" for note in agreement_notes(tables))
    sections = [("Judges against people", agreement_table(tables),
                 (warnings + "\n\n" if warnings else "") + agreement_caption(tables)
                 if tables.agreements else "No item has both a person's label and a judge's value yet.")]
    for agreement in tables.agreements:
        sections.append((f"Confusion: {agreement.decision}", agreement.confusion.reset_index(names="").astype(str),
                         "Rows: the people's label; columns: the judge's."))
    if not tables.ppi.empty:
        sections.append(("Prediction-powered means", ppi_text_table(tables), PPI_NOTE))
    return sections
