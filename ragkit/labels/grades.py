"""One grade per pooled item from the labels, saying whose grades it is (human, judge or both).

- A person's grades of an item are reduced to one by the low median over annotators (two
  annotators grading 1 and 2 give 1): a grade that half the people would not give is not taken.
- The LLM judge's 0-3 chunk grades are mapped onto the person's 0-2 scale (``JUDGE_TO_HUMAN``);
  its invalid replies are no grade.
- ``grades="combined"`` takes the person's grade where there is one and the judge's elsewhere;
  every row says which it used (``grade_source``), and every metric built on it says the mix.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from ragkit.errors import ConfigError
from ragkit.labels.store import HUMAN, JUDGE

GradeSource = Literal["human", "judge", "combined"]
GRADE_SOURCES = ("human", "judge", "combined")
# The judge's rubric (ragkit.labels.relevance_judge): 0 unrelated, 1 on topic without answer
# information, 2 part of the answer, 3 the whole answer. A person's: 0 not, 1 partly, 2 relevant.
JUDGE_TO_HUMAN = {0: 0, 1: 0, 2: 1, 3: 2}


def low_median(values: pd.Series) -> float:
    ordered = np.sort(values.dropna().to_numpy(dtype=float))
    return float(ordered[(len(ordered) - 1) // 2]) if len(ordered) else np.nan


def human_consensus(labels: pd.DataFrame, field: str) -> pd.DataFrame:
    """Per (question_id, item_id): the people's low-median ``field`` and how many gave one."""
    rows = labels[(labels["source"] == HUMAN) & labels[field].notna()]
    if rows.empty:
        return pd.DataFrame(columns=["question_id", "item_id", field, "annotators"])
    grouped = rows.assign(value=rows[field].astype("float64")).groupby(["question_id", "item_id"], sort=True)["value"]
    return pd.DataFrame({field: grouped.agg(low_median), "annotators": grouped.size()}).reset_index()


def judge_grades(labels: pd.DataFrame) -> pd.DataFrame:
    """Per (question_id, item_id): the judge's latest valid relevance, on its own 0-3 scale and mapped."""
    rows = labels[(labels["source"] == JUDGE) & labels["valid"].fillna(False).astype(bool)
                  & labels["relevance"].notna()]
    rows = rows.drop_duplicates(["question_id", "item_id"], keep="last")
    return pd.DataFrame({"question_id": rows["question_id"], "item_id": rows["item_id"],
                         "judge_grade": rows["relevance"].astype("int64"),
                         "relevance": rows["relevance"].astype("int64").map(JUDGE_TO_HUMAN).astype("float64")})


def chunk_grades(labels: pd.DataFrame, grades: GradeSource = "combined") -> pd.DataFrame:
    """question_id, item_id, relevance (0-2), grade_source (human | judge) of every graded chunk."""
    if grades not in GRADE_SOURCES:
        raise ConfigError(f"unknown grades '{grades}'. Valid choices: {', '.join(GRADE_SOURCES)}")
    chunks = labels[labels["item_kind"] == "chunk"]
    human = human_consensus(chunks, "relevance").assign(grade_source=HUMAN)[
        ["question_id", "item_id", "relevance", "grade_source"]]
    judged = judge_grades(chunks).assign(grade_source=JUDGE)[["question_id", "item_id", "relevance", "grade_source"]]
    if grades == "human":
        chosen = human
    elif grades == "judge":
        chosen = judged
    else:
        have = set(zip(human["question_id"], human["item_id"]))
        rest = judged[[key not in have for key in zip(judged["question_id"], judged["item_id"])]]
        chosen = pd.concat([human, rest], ignore_index=True)
    return chosen.reset_index(drop=True).astype({"relevance": "float64"})


def describe_grades(table: pd.DataFrame) -> str:
    """'human' / 'judge' / 'human 12 + judge 30' for the grades a metric used."""
    counts = table["grade_source"].value_counts()
    if len(counts) == 0:
        return "none"
    if len(counts) == 1:
        return str(counts.index[0])
    return " + ".join(f"{source} {int(counts.get(source, 0))}" for source in (HUMAN, JUDGE))
