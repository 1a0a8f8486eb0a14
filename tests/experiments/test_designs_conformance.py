"""experiments/reference/DESIGNS.md holds each design's numbers beside the field of its reference
experiment that sets them; this reads every table row against the file as written (after the file
loaded as a config, so it still validates). A file that drifts from its design fails here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragkit.experiments.config import load_config

pytestmark = pytest.mark.unit

REFERENCE = Path(__file__).resolve().parents[2] / "experiments" / "reference"
SECTION = re.compile(r"^## (?P<file>\w+\.yaml)\b")


def design_rows(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """file -> its rows (design, field, value), from the tables under ``## file.yaml``."""
    rows: dict[str, list[tuple[str, str, str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        if match := SECTION.match(line):
            current = match["file"]
            rows[current] = []
        elif current and line.startswith("|") and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) != 4:
                raise ValueError(f"DESIGNS.md: a row of {current} needs 4 cells: {line!r}")
            if cells[0] != "design":  # the header row
                rows[current].append((cells[0], cells[2], cells[3]))
    return rows


def field_at(data: Any, path: str) -> Any:
    """The value at a dotted ``path``; a key starting with a dot (a file suffix) is written after it:
    ``file_types..txt.size``; a number indexes a list."""
    parts = path.split(".")
    keys: list[str] = []
    while parts:
        part = parts.pop(0)
        keys.append("." + parts.pop(0) if part == "" and parts else part)
    for key in keys:
        if isinstance(data, list):
            data = data[int(key)]
        elif isinstance(data, dict) and key in data:
            data = data[key]
        else:
            raise KeyError(f"no field {key!r} on the way to {path!r}")
    return data


def matches(actual: Any, written: str) -> bool:
    """Numbers by value, booleans as true/false, lists as JSON, anything else as text."""
    if isinstance(actual, bool):
        return written.lower() == str(actual).lower()
    if isinstance(actual, (int, float)):
        try:
            return math.isclose(float(actual), float(written))
        except ValueError:
            return False
    if isinstance(actual, list):
        return actual == json.loads(written)
    return str(actual) == written


ROWS = design_rows((REFERENCE / "DESIGNS.md").read_text(encoding="utf-8"))


def test_every_reference_experiment_has_a_table():
    assert set(ROWS) == {path.name for path in REFERENCE.glob("*.yaml")}
    assert all(len(rows) >= 10 for rows in ROWS.values())


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_design_number_is_the_one_its_file_sets(name, monkeypatch):
    monkeypatch.setattr("ragkit.llms.defaults.ollama_answers", lambda *args, **kwargs: False)
    path = REFERENCE / name
    load_config(path)  # the file is a valid config: what the rows read is what a run uses
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    wrong = [(design, field, written, field_at(data, field)) for design, field, written in ROWS[name]
             if not matches(field_at(data, field), written)]
    assert not wrong, f"{name}: fields that differ from the design (design, field, design's value, file's): {wrong}"


@pytest.mark.parametrize(("path", "value"), [
    ("chunkers.0.params.file_types..txt.size", 3), ("judges.retrieval.params.max_chunks", 15),
    ("retrievers.0.type", "dense"),
])
def test_fields_are_read_by_path(path, value):
    data = {"chunkers": [{"params": {"file_types": {".txt": {"size": 3}}}}],
            "judges": {"retrieval": {"params": {"max_chunks": 15}}}, "retrievers": [{"type": "dense"}]}
    assert field_at(data, path) == value


@pytest.mark.parametrize(("actual", "written", "expected"), [
    (0.6, "0.6", True), (0.6, "0.8", False), (2, "2", True), (True, "true", True), (False, "true", False),
    ([65, 50], "[65, 50]", True), ([65, 50], "[50, 65]", False), ("design", "design", True), ("x", "y", False),
])
def test_values_match_by_kind(actual, written, expected):
    assert matches(actual, written) is expected


def test_a_drift_fails():
    data = {"judges": {"groundedness": {"params": [{}, {"accept_at": 0.8}]}}}
    assert not matches(field_at(data, "judges.groundedness.params.1.accept_at"), "0.6")
