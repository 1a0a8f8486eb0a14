"""Labels as a results table: people's grades and the LLM judge's, append-only, in the results folder.

Layout (beside the ResultStore tables, which it does not touch):

- ``labels/pools/<pool_id>.json``: a pool (ragkit.labels.pooling), one atomic write.
- ``labels/sessions/<utc time>-<key>.parquet``: one labelling session's rows (a person's save on
  the page, an imported sheet, one judge pass), one atomic write, never rewritten.

Why not the ResultStore's parts and commit markers: those exist for (run, question shard)
parts that a killed run must resume without duplicates; a session is written whole by one atomic
write (a file that exists is complete, as the ``runs`` and ``questions`` files), belongs to no
run, and must not enter compaction, merged copies or staleness. A correction is a later row, so
nothing is ever lost: readers take each annotator's latest label of an item (``current``).

Scales (``SCALES``): a person grades a chunk 2 relevant / 1 partly / 0 not relevant and an
answer 2 correct / 1 partly / 0 wrong, plus grounded yes/no; the LLM judge grades chunks 0-3
(ragkit.labels.relevance_judge), mapped onto the person's scale for agreement.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragkit.errors import ConfigError, validation_problems
from ragkit.hashing import content_key
from ragkit.json_input import load_json
from ragkit.labels.pooling import POOLS_FOLDER, Pool
from ragkit.storage.folders import as_location, open_folder

SESSIONS_FOLDER = "labels/sessions"
HUMAN, JUDGE = "human", "judge"
# Grade names per field, lowest first; the grade is the position.
RELEVANCE_NAMES = ("not", "partly", "relevant")
CORRECT_NAMES = ("wrong", "partly", "correct")
JUDGE_RELEVANCE_MAX = 3
SCALES = {"relevance": f"human 0-2 ({'/'.join(RELEVANCE_NAMES)}); judge 0-{JUDGE_RELEVANCE_MAX}",
          "correct": f"0-2 ({'/'.join(CORRECT_NAMES)})", "grounded": "yes/no"}

COLUMNS: dict[str, str] = {
    "session": "string", "annotator": "string", "source": "string", "labelled_at": "string", "pool_id": "string",
    "question_id": "string", "document": "string", "item_kind": "string", "item_id": "string",
    "doc_id": "string", "start_char": "Int64", "end_char": "Int64", "run_id": "string",
    "relevance": "Int64", "correct": "Int64", "grounded": "boolean",
    "valid": "boolean", "error": "string", "raw_reply": "string", "model": "string",
}


class LabelRow(BaseModel):
    """One label. A chunk row carries ``relevance``; an answer row ``correct`` and/or ``grounded``.
    A judge row whose reply could not be read is ``valid: false`` with the error and no grade."""

    model_config = ConfigDict(extra="ignore")

    annotator: str = Field(min_length=1, max_length=100, description="Who labelled: a person's name, or judge:<model>.")
    source: str = Field(default=HUMAN, pattern=f"^({HUMAN}|{JUDGE})$")
    pool_id: str = Field(min_length=1)
    question_id: str = Field(min_length=1)
    document: str = Field(min_length=1, description="The question's source document (resampling unit).")
    item_kind: str = Field(pattern="^(chunk|answer)$")
    item_id: str = Field(min_length=1)
    doc_id: str | None = None
    start_char: int | None = Field(default=None, ge=0)
    end_char: int | None = Field(default=None, ge=0)
    run_id: str | None = None
    relevance: int | None = Field(default=None, ge=0, le=JUDGE_RELEVANCE_MAX)
    correct: int | None = Field(default=None, ge=0, le=len(CORRECT_NAMES) - 1)
    grounded: bool | None = None
    valid: bool = True
    error: str | None = None
    raw_reply: str | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _check_grades(self) -> LabelRow:
        if self.source == HUMAN and self.relevance is not None and self.relevance > len(RELEVANCE_NAMES) - 1:
            raise ValueError(f"a person's relevance grade is 0-{len(RELEVANCE_NAMES) - 1} "
                             f"({'/'.join(RELEVANCE_NAMES)}), got {self.relevance}")
        graded = self.relevance is not None or self.correct is not None or self.grounded is not None
        if self.valid and not graded:
            raise ValueError(f"item {self.item_id}: a label needs a grade (relevance, correct or grounded)")
        if not self.valid and graded:
            raise ValueError(f"item {self.item_id}: an invalid judge reply carries no grade")
        return self


def empty_labels() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=dtype) for column, dtype in COLUMNS.items()})


class LabelStore:
    """The labels and pools of one results folder (local or ``s3://``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = as_location(root)
        self.files = open_folder(self.root)

    # --- pools ---------------------------------------------------------------------------------

    def save_pool(self, pool: Pool) -> str:
        relative = f"{POOLS_FOLDER}/{pool.pool_id}.json"
        self.files.write_bytes(relative, pool.model_dump_json(indent=1).encode())
        return self.files.path(relative)

    def pool(self, pool_id: str) -> Pool:
        valid = self.pool_ids()
        if pool_id not in valid:
            raise ConfigError(f"no pool '{pool_id}' in {self.root}. Valid pools: {', '.join(valid) or '(none)'}")
        relative = f"{POOLS_FOLDER}/{pool_id}.json"
        data = load_json(self.files.read_bytes(relative), self.files.path(relative))
        try:
            return Pool.model_validate(data)
        except ValidationError as error:
            raise ConfigError(f"{self.files.path(relative)}: {validation_problems(error, 'field', 'the pool', Pool)}"
                              ) from None

    def pool_ids(self) -> list[str]:
        """Pool ids, oldest first."""
        return [entry.stem for entry in sorted(self.files.list(POOLS_FOLDER, ".json"), key=lambda e: e.mtime)]

    def latest_pool(self) -> Pool | None:
        ids = self.pool_ids()
        return self.pool(ids[-1]) if ids else None

    # --- labels --------------------------------------------------------------------------------

    def add(self, rows: list[dict] | pd.DataFrame, labelled_at: str | None = None) -> str:
        """Write one session of labels (validated row by row); its id. Nothing is overwritten."""
        records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
        if not records:
            raise ConfigError("no labels to save")
        checked = []
        for number, record in enumerate(records, start=1):
            clean = {key: (None if _missing(value) else value) for key, value in record.items()}
            try:
                checked.append(LabelRow.model_validate(clean).model_dump())
            except ValueError as error:
                raise ConfigError(f"label {number}: {_first_error(error)}") from None
        when = labelled_at or datetime.now(UTC).isoformat(timespec="microseconds")
        session = f"{when.replace(':', '').replace('-', '').replace('+0000', 'Z')}-{content_key(checked, length=8)}"
        frame = pd.DataFrame(checked).assign(session=session, labelled_at=when)
        buffer = io.BytesIO()
        conform(frame).to_parquet(buffer, index=False)
        self.files.write_bytes(f"{SESSIONS_FOLDER}/{session}.parquet", buffer.getvalue())
        return session

    def read(self) -> pd.DataFrame:
        """Every label of every session, in the order written."""
        import pyarrow.parquet as pq

        entries = self.files.list(SESSIONS_FOLDER, ".parquet")
        if not entries:
            return empty_labels()
        frames = [conform(pq.read_table(entry.path, filesystem=self.files.filesystem).to_pandas())
                  for entry in entries]
        return pd.concat(frames, ignore_index=True).sort_values("labelled_at", kind="stable", ignore_index=True)

    def current(self, pool_id: str | None = None) -> pd.DataFrame:
        """Each annotator's latest label of each item (of ``pool_id`` only, when given)."""
        return current_labels(self.read(), pool_id)


def current_labels(labels: pd.DataFrame, pool_id: str | None = None) -> pd.DataFrame:
    if pool_id is not None:
        labels = labels[labels["pool_id"] == pool_id]
    return labels.drop_duplicates(["pool_id", "item_id", "annotator"], keep="last").reset_index(drop=True)


def conform(frame: pd.DataFrame) -> pd.DataFrame:
    """Exactly the label table's columns in its dtypes (missing ones null)."""
    frame = frame.copy()
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    return frame[list(COLUMNS)].astype(COLUMNS)


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array: not a missing scalar
        return False


def _first_error(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field}: {first['msg']}" if field else str(first["msg"])
    return str(error)
