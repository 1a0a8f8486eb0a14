"""Why each question fails: one class per (run, question), from the results folder alone.

Terms. The run's *final context* holds at most ``depth`` chunks (the runs table's ``depth``, else
``top_k``): what the retriever returned after every judge. The *cut* is the first ``cut`` chunks
of it (default 5, as recall@5; a run whose depth is smaller has its whole context in the cut).
*Evidence* is read from the run's own scores at the question's finest level: span level
(``span_recall@k``) when the question has answer spans, else document level (``recall@k``);
evidence at k means that metric > 0 at k (some part of the answer, or some relevant document, is
among the first k chunks). A k that is not scored reads the largest scored k below it; depth
reads the largest k scored (the scores of a final context of fewer chunks are its full-context
scores).

*Relevant documents* are the question's source document (``questions.document``, the answer's
or most relevant judged document) and every document that raised the question's document-level
recall at some rank of some run's final context in the folder. A chunk is relevant when its
document is (chunk ids are ``<doc_id>:<index>``): judges and citations are read at document
level, since the folder does not store answer spans. A relevant document that no final context
in the folder holds and that is not the source document is not known.

The first rule that holds gives the class:

1. ``pipeline error``: the question's evidence score at depth is NaN with an error.
   ``no ground truth``: the question has no evidence score (nothing to score against).
2. ``answered well``: evidence in the cut, and, when the run generated an answer to the question,
   the answer used it: it cites a relevant chunk; when the run's answers carry no citations at all,
   the first of groundedness, faithfulness, embedding_groundedness scored for it is >= 0.5 (none
   scored: used).
3. ``judge reply invalid``: some judge's reply for the question was invalid (``judgements.valid``
   false; it fell back to the judge-off behaviour); the judge is named.
4. ``retrieved but not used``: evidence in the cut, but the answer did not use it (rule 2).
5. ``ranked too low``: evidence in the final context, none in the cut.
6. ``dropped by judge``: no evidence in the final context, and a judge was shown a relevant chunk
   and did not keep it (``decision``: shown, scores or ratings minus kept); the first such judge
   in the order the trace recorded them is named.
7. ``not retrieved``: no relevant chunk in the final context nor among what a judge dropped.

Every question a run was asked (has score rows for) gets exactly one class, so a run's classes sum
to its questions.

Beside the class, where the run scored them (an LLM judged them), RAGChecker's claim-level
diagnostics of the question (``ragkit.metrics.claims``): ``context_utilization`` and
``noise_sensitivity`` columns, NaN where the score failed; absent when no run scored them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragkit.analysis.loading import Results
from ragkit.metrics.names import CLAIM_DIAGNOSTICS, NOTHING_TO_SCORE, parse_metric

ERROR, NO_TRUTH = "pipeline error", "no ground truth"
ANSWERED, INVALID, NOT_USED = "answered well", "judge reply invalid", "retrieved but not used"
RANKED_LOW, DROPPED, NOT_RETRIEVED = "ranked too low", "dropped by judge", "not retrieved"
CLASSES = (ANSWERED, NOT_RETRIEVED, RANKED_LOW, DROPPED, NOT_USED, INVALID, ERROR, NO_TRUTH)
COLUMNS = ["run_id", "question_id", "failure_class", "judge", "level", "cut", "detail"]
DEFAULT_CUT = 5
GROUNDING_VERDICTS = ("groundedness", "faithfulness", "embedding_groundedness")
USED_THRESHOLD = 0.5
EVIDENCE_FAMILIES = {"span": "span_recall", "document": "recall"}


def _evidence_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """[run_id, question_id, level, k, value, error] of the recall@k and span_recall@k rows."""
    names = scores["metric"].astype("string")
    parsed = {name: parse_metric(name) for name in names.dropna().unique()}
    # k is None for the uncut and the token-budget forms (recall@512tok).
    family = names.map(lambda n: parsed[n].family if n in parsed and parsed[n].k is not None else None)
    mine = scores[family.isin(list(EVIDENCE_FAMILIES.values())).fillna(False).to_numpy(dtype=bool)]
    levels = {value: key for key, value in EVIDENCE_FAMILIES.items()}
    return pd.DataFrame({
        "run_id": mine["run_id"].astype(str).to_numpy(), "question_id": mine["question_id"].astype(str).to_numpy(),
        "level": [levels[parsed[n].family] for n in mine["metric"].astype(str)],
        "k": [parsed[n].k for n in mine["metric"].astype(str)],
        "value": mine["value"].to_numpy(dtype="float64"), "error": mine["error"].astype("string").to_numpy(),
    })


def _evidence_summary(evidence: pd.DataFrame, cuts: dict[str, int]) -> dict[tuple[str, str], tuple]:
    """(run, question) -> (level, value at depth, its error, value at the cut) from the evidence
    rows at the question's finest level; all at once, not per question."""
    if evidence.empty:
        return {}
    span = evidence["level"] == "span"
    has_span = span.groupby([evidence["run_id"], evidence["question_id"]], sort=False).transform("max")
    rows = evidence[span.to_numpy() == has_span.to_numpy(dtype=bool)].reset_index(drop=True)
    deepest = rows.loc[rows.groupby(["run_id", "question_id"], sort=False)["k"].idxmax()]
    cut = rows["run_id"].map(cuts).fillna(np.inf).to_numpy()
    within = rows[rows["k"].to_numpy() <= cut]
    at_cut = within.loc[within.groupby(["run_id", "question_id"], sort=False)["k"].idxmax()] if not within.empty \
        else within
    cut_values = dict(zip(zip(at_cut["run_id"], at_cut["question_id"]), at_cut["value"]))
    return {(run, question): (level, value, error, cut_values.get((run, question), np.nan))
            for run, question, level, value, error in zip(deepest["run_id"], deepest["question_id"], deepest["level"],
                                                          deepest["value"], deepest["error"])}


def relevant_documents(results: Results, evidence: pd.DataFrame) -> dict[str, set[str]]:
    """question_id -> its relevant documents known to the folder (module docstring)."""
    relevant: dict[str, set[str]] = defaultdict(set)
    questions = results.questions
    if not questions.empty and "document" in questions.columns:
        counts = questions.reindex(columns=["n_relevant_docs", "n_answer_groups"]).astype("float64").fillna(0)
        has_truth = counts.sum(axis=1) > 0
        for question_id, document in zip(questions.loc[has_truth, "question_id"], questions.loc[has_truth, "document"]):
            if not pd.isna(document):
                relevant[str(question_id)].add(str(document))
    doc = evidence[(evidence["level"] == "document") & evidence["value"].notna()].sort_values("k")
    doc = doc.assign(previous_k=doc.groupby(["run_id", "question_id"])["k"].shift(fill_value=0),
                     previous=doc.groupby(["run_id", "question_id"])["value"].shift(fill_value=0.0))
    raised = doc[(doc["value"] > doc["previous"]) & (doc["previous_k"] == doc["k"] - 1)]
    if not raised.empty:
        ranks = results.retrievals
        ranks = pd.DataFrame({"run_id": ranks["run_id"].astype(str), "question_id": ranks["question_id"].astype(str),
                              "k": ranks["rank"].astype("int64"), "doc_id": ranks["doc_id"].astype(str)})
        found = raised.merge(ranks, on=["run_id", "question_id", "k"])
        for question_id, doc_id in zip(found["question_id"], found["doc_id"]):
            relevant[question_id].add(doc_id)
    return relevant


def _document(chunk_id: str) -> str:
    return chunk_id.rsplit(":", 1)[0]


def _judge_drops(rows: pd.DataFrame) -> list[tuple[str, set[str]]]:
    """(judge, chunk ids it was shown and did not keep) per judge, in recorded order."""
    shown: dict[str, set[str]] = {}
    kept: dict[str, set[str]] = {}
    for judge, text in zip(rows["judge"].astype(str), rows["decision"]):
        try:
            decision = json.loads(text) if isinstance(text, str) else {}
        except json.JSONDecodeError:
            continue
        if not isinstance(decision, dict):
            continue
        seen = shown.setdefault(judge, set())
        for key in ("shown", "dropped"):
            seen.update(str(i) for i in decision.get(key) or [] if isinstance(i, str))
        for key in ("scores", "ratings"):
            if isinstance(decision.get(key), dict):
                seen.update(str(i) for i in decision[key])
        if isinstance(decision.get("kept"), list):
            kept[judge] = {str(i) for i in decision["kept"]}
    return [(judge, seen - kept[judge]) for judge, seen in shown.items() if judge in kept]


def _answer_used(answer: dict | None, relevant: set[str], verdicts: dict[str, float], cites: bool) -> bool:
    if answer is None:
        return True
    if cites:
        try:
            cited = json.loads(answer["citations"]) if isinstance(answer["citations"], str) else []
        except json.JSONDecodeError:
            cited = []
        return any(_document(str(chunk)) in relevant for chunk in cited or [])
    for name in GROUNDING_VERDICTS:
        if name in verdicts and not np.isnan(verdicts[name]):
            return verdicts[name] >= USED_THRESHOLD
    return True


@dataclass
class _Trace:
    """What the folder holds about one (run, question) beyond its evidence scores."""

    relevant: set[str]
    judged: pd.DataFrame | None  # its judgements rows
    answer: dict | None  # its answers row
    verdicts: dict[str, float]  # its grounding verdicts (GROUNDING_VERDICTS)
    cites: bool  # whether the run's answers carry citations at all
    error: str | None  # the first error of its score rows (not the "nothing to score" one)


def _score_names(results: Results) -> list[str]:
    """The score rows read: evidence at every k, the grounding verdicts, the no-ground-truth row."""
    names = [name for name in results.metric_names
             if parse_metric(name).k is not None and parse_metric(name).family in EVIDENCE_FAMILIES.values()]
    return [*names, *[name for name in GROUNDING_VERDICTS if name in results.metric_names], "retrieval"]


def failure_classes(results: Results, cut: int = DEFAULT_CUT) -> pd.DataFrame:
    """One row per (run, question asked): its class (module docstring), the judge for dropped
    by judge and judge reply invalid, the evidence level, the run's cut and a short detail."""
    if cut < 1:
        raise ValueError(f"cut must be >= 1, got {cut}")
    scores = results.scores_of(_score_names(results))
    if scores.empty:
        return pd.DataFrame({column: pd.Series(dtype="object") for column in COLUMNS})
    keys = scores[["run_id", "question_id"]].astype(str)
    evidence = _evidence_rows(scores)
    relevant = relevant_documents(results, evidence)
    runs = results.runs.set_index(results.runs["run_id"].astype(str))
    depths = {run_id: _depth(runs, run_id) for run_id in runs.index}
    cuts = {run_id: cut if depth is None else min(cut, depth) for run_id, depth in depths.items()}
    summary = _evidence_summary(evidence, cuts)
    judgements = results.judgements
    judgements = judgements[judgements["question_id"].notna()]
    judged = {key: rows for key, rows in judgements.groupby(  # noqa: C416
        [judgements["run_id"].astype(str), judgements["question_id"].astype(str)], sort=False)}
    answers = results.answers
    answer_of = {(str(row["run_id"]), str(row["question_id"])): row for row in answers.to_dict("records")}
    citing_runs = {str(r) for r, c in zip(answers["run_id"], answers["citations"])
                   if isinstance(c, str) and c.strip() not in ("", "[]")}
    verdicts: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    is_verdict = scores["metric"].isin(GROUNDING_VERDICTS).to_numpy(dtype=bool)
    for run_id, question_id, metric, value in zip(keys["run_id"][is_verdict], keys["question_id"][is_verdict],
                                                  scores["metric"].astype(str)[is_verdict],
                                                  scores["value"][is_verdict]):
        verdicts[(run_id, question_id)][metric] = float(value)
    messages = scores["error"].astype("string")
    failed = (messages.notna() & (messages != NOTHING_TO_SCORE)).fillna(False).to_numpy(dtype=bool)
    errors = dict(zip(zip(keys["run_id"][failed], keys["question_id"][failed]), messages[failed].astype(str)))
    out = []
    for run_id, question_id in keys.drop_duplicates().itertuples(index=False):
        key = (run_id, question_id)
        trace = _Trace(relevant.get(question_id, set()), judged.get(key), answer_of.get(key), verdicts.get(key, {}),
                       run_id in citing_runs, errors.get(key))
        run_cut = cuts.get(run_id, cut)
        record = {"run_id": run_id, "question_id": question_id, "judge": None, "level": None, "cut": run_cut,
                  "detail": ""}
        record.update(_classify(summary.get(key), run_cut, depths.get(run_id), trace))
        out.append(record)
    return _with_claim_diagnostics(results, pd.DataFrame(out, columns=COLUMNS))


def _with_claim_diagnostics(results: Results, classes: pd.DataFrame) -> pd.DataFrame:
    """The claim-level diagnostics scored in the folder as columns beside the classes."""
    names = [name for name in CLAIM_DIAGNOSTICS if name in results.metric_names]
    if not names:
        return classes
    scores = results.scores_of(names)
    valid = scores[scores["error"].isna()]
    table = pd.DataFrame({"run_id": valid["run_id"].astype(str), "question_id": valid["question_id"].astype(str),
                          "metric": valid["metric"].astype(str), "value": valid["value"].astype("float64")})
    wide = table.pivot_table(index=["run_id", "question_id"], columns="metric", values="value", aggfunc="mean")
    wide = wide.reindex(columns=names).reset_index()
    wide.columns.name = None
    return classes.merge(wide, on=["run_id", "question_id"], how="left")


def _depth(runs: pd.DataFrame, run_id: str) -> int | None:
    if run_id not in runs.index:
        return None
    for column in ("depth", "top_k"):
        if column in runs.columns and not pd.isna(runs.at[run_id, column]):
            return int(runs.at[run_id, column])
    return None


def _classify(evidence: tuple | None, cut: int, depth: int | None, trace: _Trace) -> dict:
    if evidence is None:
        if trace.error is not None:
            return {"failure_class": ERROR, "detail": trace.error.split(":", 1)[0]}
        return {"failure_class": NO_TRUTH}
    level, value_at_depth, error, value_at_cut = evidence
    if pd.isna(value_at_depth):
        error = "" if pd.isna(error) else str(error)
        return {"failure_class": ERROR, "level": level, "detail": error.split(":", 1)[0] or "no value"}
    in_cut = not pd.isna(value_at_cut) and value_at_cut > 0
    used = _answer_used(trace.answer, trace.relevant, trace.verdicts, trace.cites)
    base = {"level": level}
    if in_cut and used:
        return {**base, "failure_class": ANSWERED}
    judged = trace.judged
    if judged is not None and (judged["valid"] == False).any():  # noqa: E712 - a nullable column
        invalid = judged[judged["valid"] == False]  # noqa: E712
        return {**base, "failure_class": INVALID, "judge": str(invalid["judge"].iloc[0]),
                "detail": "" if pd.isna(invalid["error"].iloc[0]) else str(invalid["error"].iloc[0])[:120]}
    if in_cut:
        return {**base, "failure_class": NOT_USED, "detail": "the answer does not use a relevant chunk"}
    if value_at_depth > 0:
        return {**base, "failure_class": RANKED_LOW, "detail": f"evidence in the final context, not in the first {cut}"}
    for judge, dropped in _judge_drops(judged) if judged is not None else []:
        hit = sorted(chunk for chunk in dropped if _document(chunk) in trace.relevant)
        if hit:
            return {**base, "failure_class": DROPPED, "judge": judge, "detail": f"dropped {', '.join(hit[:3])}"}
    return {**base, "failure_class": NOT_RETRIEVED, "detail": f"no relevant chunk in the {depth or '?'} searched"}


def class_counts(classes: pd.DataFrame) -> pd.DataFrame:
    """Runs x classes: how many questions of each run fall in each class (columns in CLASSES order)."""
    table = pd.crosstab(classes["run_id"], classes["failure_class"])
    return table.reindex(columns=[c for c in CLASSES if c in table.columns], fill_value=0).reset_index()
