"""Each reference experiment's header says, line by line, which of its design's components and
numbers the experiment sets and where (issue 31, item 8); this holds the header to the grid.

The header format (right under the title comment):

    # Design, line by line (component: the design's numbers -> where it is set):
    # - two-stage rerank, prefilter: keeps 15 candidates -> judge.rerank.prefilter_n=15
    # Offline stand-ins (what cannot run offline, and what runs instead):
    # - <design's piece>: <what stands in> -> <column>=<value>

A line's columns are the runs table's (``ragkit.experiments.plan.run_row``, the function the
executor writes the runs table with), and its ``column=value`` pairs must hold together in some
run of the experiment's plan. No run is made: the grid is expanded and planned, which is pure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import GENERATOR, load_config
from ragkit.experiments.plan import CHUNKING, EVALUATION, make_plan, run_row
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet
from ragkit.stages.base import STAGES

pytestmark = pytest.mark.integration

REFERENCE = Path(__file__).resolve().parents[2] / "experiments" / "reference"
DESIGN = "Design, line by line"
OFFLINE = "Offline stand-ins"
# The fewest "Design" lines each header may have: the components of each design that the
# experiment can set today (their count in the design, not in the current header).
MIN_COMPONENTS = {
    "judges": 11,
    "agentic": 9,
    "dynamic_documents": 6,
    "context_enhancement": 7,
    "pipeline": 6,
}


class HeaderError(ValueError):
    """A header line that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class HeaderLine:
    block: str
    line: int
    text: str
    pairs: tuple[tuple[str, str], ...]

    def where(self, source: str) -> str:
        return f"{source}:{self.line}: {self.text!r}"


def parse_header(text: str, source: str) -> dict[str, list[HeaderLine]]:
    """The "Design" and "Offline stand-ins" blocks of the leading comment: each item a line
    ``# - ...`` (a line ``#   ...`` continues it) ending in ``-> column=value[; column=value]``."""
    items: dict[str, list[tuple[int, str]]] = {}
    block: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("#"):
            break  # the header is the leading comment
        body = line[1:].strip()
        if body.startswith(DESIGN) or body.startswith(OFFLINE):
            block = DESIGN if body.startswith(DESIGN) else OFFLINE
            if block in items:
                raise HeaderError(f"{source}:{number}: a second {block!r} block")
            items[block] = []
        elif block is not None and line.startswith("# - "):
            items[block].append((number, line[4:].strip()))
        elif block is not None and line.startswith("#   ") and items[block]:
            start, previous = items[block][-1]
            items[block][-1] = (start, f"{previous} {body}")
        else:
            block = None  # any other comment line ends a block
    for name in (DESIGN, OFFLINE):
        if name not in items:
            raise HeaderError(f"{source}: no {name!r} block in the header comment")
    return {name: [_parse_item(name, number, item, source) for number, item in lines]
            for name, lines in items.items()}


def _parse_item(block: str, number: int, text: str, source: str) -> HeaderLine:
    described, arrow, targets = text.rpartition(" -> ")
    if not arrow:
        raise HeaderError(f"{source}:{number}: no ' -> column=value' in {text!r}")
    component, colon, numbers = described.partition(":")
    if not colon or not component.strip() or not numbers.strip():
        raise HeaderError(f"{source}:{number}: expected '<component>: <numbers> -> ...', got {text!r}")
    pairs = []
    for target in targets.split(";"):
        column, equals, value = target.strip().partition("=")
        if not equals or not column or not value or " " in column:
            raise HeaderError(f"{source}:{number}: {target.strip()!r} is not column=value in {text!r}")
        pairs.append((column, value))
    return HeaderLine(block, number, text, tuple(pairs))


def cell_matches(cell: object, written: str) -> bool:
    """A runs-table cell against the header's text: booleans as ``true``/``false`` (any case, as
    YAML reads them), numbers by value (``15`` is ``15.0``), strings exactly; an empty cell (None)
    matches nothing."""
    if isinstance(cell, bool):
        return written.lower() in ("true", "false") and cell == (written.lower() == "true")
    if isinstance(cell, (int, float)):
        try:
            return math.isclose(cell, float(written))
        except ValueError:
            return False
    return isinstance(cell, str) and cell == written


def plan_rows(path: Path) -> list[dict]:
    """The runs-table rows of the experiment's plan, on one tiny corpus, every LLM role on the
    embedded model (what an offline machine resolves to)."""
    corpus = Corpus.from_documents("design", [make_document("d1", "Cats purr when content. " * 5)])
    questions = QuestionSet(name="design", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    local = llms.resolve({"type": "local"})
    roles = dict.fromkeys([*STAGES.names(), GENERATOR, CHUNKING, EVALUATION], local)
    plan = make_plan(load_config(path), corpus, questions, roles)
    return [run_row(plan, step) for step in plan.runs]


def check_header(header: dict[str, list[HeaderLine]], rows: list[dict], source: str) -> None:
    known = set().union(*(row.keys() for row in rows))
    for line in [*header[DESIGN], *header[OFFLINE]]:
        unknown = [column for column, _ in line.pairs if column not in known]
        if unknown:
            raise HeaderError(f"{line.where(source)}: no runs-table column {unknown} "
                              f"(columns: {sorted(known)})")
        if not any(all(cell_matches(row.get(column), value) for column, value in line.pairs) for row in rows):
            raise HeaderError(f"{line.where(source)}: no run of the plan has all of {dict(line.pairs)}")


@pytest.fixture
def offline(monkeypatch):
    """No Ollama server answers: an `auto` embedder resolves to MiniLM, as it does offline."""
    monkeypatch.setattr("ragkit.llms.defaults.ollama_answers", lambda *args, **kwargs: False)


@pytest.mark.parametrize("name", sorted(MIN_COMPONENTS))
def test_every_header_line_holds_in_some_run_of_its_experiment(name, offline):
    path = REFERENCE / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    header = parse_header(text, path.name)
    assert len(header[DESIGN]) >= MIN_COMPONENTS[name], (
        f"{path.name}: {len(header[DESIGN])} design lines, the design has at least {MIN_COMPONENTS[name]} components")
    check_header(header, plan_rows(path), path.name)


def test_the_five_reference_experiments_are_all_checked():
    assert {path.stem for path in REFERENCE.glob("*.yaml")} == set(MIN_COMPONENTS)


SAMPLE = """\
# Reference pipeline "sample": a title.
# Design, line by line (component: the design's numbers -> where it is set):
# - rerank: keeps 4 of 15,
#   shown with titles -> judge.rerank=llm; judge.rerank.top_n=4
# - retrieval: 15 candidates -> top_k=15
# Offline stand-ins (what cannot run offline, and what runs instead):
# - cross-encoder: BM25 -> judge.rerank.prefilter=bm25
#
# Run: ragkit run sample.yaml
name: sample
# - not a header line -> x=1
"""

ROWS = [
    {"top_k": 15, "judge.rerank": "off"},
    {"top_k": 15, "judge.rerank": "llm", "judge.rerank.top_n": 4, "judge.rerank.prefilter": "bm25"},
]


@pytest.mark.unit
def test_the_parser_reads_both_blocks_continuations_and_pairs():
    header = parse_header(SAMPLE, "sample.yaml")
    assert [(line.line, line.pairs) for line in header[DESIGN]] == [
        (3, (("judge.rerank", "llm"), ("judge.rerank.top_n", "4"))),
        (5, (("top_k", "15"),)),
    ]
    assert [line.pairs for line in header[OFFLINE]] == [(("judge.rerank.prefilter", "bm25"),)]
    check_header(header, ROWS, "sample.yaml")


@pytest.mark.unit
@pytest.mark.parametrize(("bad", "message"), [
    ("# - retrieval: 15 candidates, top_k=15", "sample.yaml:5: no ' -> column=value'"),
    ("# - retrieval 15 candidates -> top_k=15", "sample.yaml:5: expected '<component>: <numbers>"),
    ("# - retrieval: 15 candidates -> top_k 15", "sample.yaml:5: 'top_k 15' is not column=value"),
])
def test_a_line_that_cannot_be_read_fails_naming_file_and_line(bad, message):
    text = SAMPLE.replace("# - retrieval: 15 candidates -> top_k=15", bad)
    with pytest.raises(HeaderError, match=re.escape(message)):
        parse_header(text, "sample.yaml")


@pytest.mark.unit
@pytest.mark.parametrize(("line", "message"), [
    ("# - retrieval: 15 candidates -> top_kk=15", r"sample.yaml:5: .*no runs-table column \['top_kk'\]"),
    ("# - retrieval: 20 candidates -> top_k=20", "sample.yaml:5: .*no run of the plan has all of"),
    # Each pair holds in some run, but not both in the same run.
    ("# - rerank off: 4 -> judge.rerank=off; judge.rerank.top_n=4", "sample.yaml:5: .*no run of the plan"),
])
def test_a_line_the_grid_does_not_hold_fails_naming_file_and_line(line, message):
    header = parse_header(SAMPLE.replace("# - retrieval: 15 candidates -> top_k=15", line), "sample.yaml")
    with pytest.raises(HeaderError, match=message):
        check_header(header, ROWS, "sample.yaml")


@pytest.mark.unit
def test_a_header_without_a_block_fails():
    with pytest.raises(HeaderError, match=re.escape("sample.yaml: no 'Offline stand-ins' block")):
        parse_header(SAMPLE.replace("# Offline stand-ins", "# Offline"), "sample.yaml")


@pytest.mark.unit
@pytest.mark.parametrize(("cell", "written", "expected"), [
    (15, "15", True), (0.4, "0.4", True), (15, "15.0", True), (15, "16", False),
    (True, "true", True), (True, "True", True), (False, "true", False), (False, "FALSE", True),
    (1, "true", False), (True, "yes", False),
    ("bm25", "bm25", True), ("off", "off", True), (None, "None", False), ("llm", "heuristic", False),
])
def test_cells_match_by_value(cell, written, expected):
    assert cell_matches(cell, written) is expected
