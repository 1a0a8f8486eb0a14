"""Hostile question sets, import files and dataset corpora: one line, exit 2, nothing written.

A row of 100,000 nested brackets in a question set, an import file or a corpus.jsonl is refused by
``ragkit.json_input`` naming the file, the line and the limit, from every command that reads it
and from the dashboard's upload; a 5,000,000-character question is refused by name before any
embedder or LLM sees it; a one-letter reference answer is not located as a span. The property
test at the end throws random nesting depths and value sizes at every reader.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragkit.cli import main
from ragkit.corpus.parsers.structured import parse_json as ingest_json
from ragkit.corpus.parsers.structured import parse_jsonl as ingest_jsonl
from ragkit.errors import ConfigError, IngestError
from ragkit.json_input import JsonInputError, load_json, parse_json
from ragkit.questions import catalogue, find_answer, load_dataset_corpus, load_question_set, resolve_answer_spans
from ragkit.questions.interop import import_question_set
from ragkit.questions.review import load_review
from ragkit.questions.spans import MIN_ANSWER_CHARS, answers_refused_as_spans, locatable_answer
from ragkit.settings import get_settings
from ragkit.yaml_input import MAX_DEPTH
from tests.conftest import REPO_ROOT
from tests.corpus.fuzzing import fuzz_settings
from tests.factories import TINY_DOCS, tiny_experiment, write_beir, write_experiment

DEEP = "[" * 100_000 + "]" * 100_000
DEPTH_MESSAGE = f"values are nested more than {MAX_DEPTH} levels deep (the limit)"
DEPTH_PATTERN = re.escape(DEPTH_MESSAGE)
LINE_CHARS = 1000


class Upload:
    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def jsonl(rows: list[object]) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def deep_row(field: str) -> str:
    """A JSON object whose ``field`` holds 100,000 nested brackets."""
    return '{"' + field + '": ' + DEEP + "}"


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_one_line(err: str, *fragments: str) -> None:
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err[:2000]
    assert len(err.strip()) <= LINE_CHARS and "Traceback" not in err and "bug in ragkit" not in err, err[:2000]
    for fragment in fragments:
        assert fragment in err, err


def experiment(tmp_path: Path, dataset: Path, fmt: str = "auto") -> Path:
    return write_experiment(tmp_path / "exp.yaml", tiny_experiment({"path": str(dataset), "format": fmt}, "hostile",
                                                                   top_k=[1]))


def plain_set(folder: Path, extra_row: str | None = None, corpus_row: str | None = None, squad: bool = False) -> Path:
    """A dataset folder: questions.jsonl (plain jsonl, or squad with answer offsets) and
    corpus.jsonl, each with an optional hostile second line."""
    folder.mkdir(parents=True)
    questions: list[object] = [{"id": "q1", "question": "what animal purrs", "answer": "Cats", "doc_id": "d1",
                                "answer_start": 0} if squad else
                               {"id": "q1", "question": "what animal purrs", "relevant_doc_ids": ["d1"]}]
    corpus: list[object] = [{"_id": doc_id, "text": text} for doc_id, text in TINY_DOCS.items()]
    (folder / "questions.jsonl").write_text(jsonl(questions + ([extra_row] if extra_row else [])), encoding="utf-8")
    (folder / "corpus.jsonl").write_text(jsonl(corpus[:1] + ([corpus_row] if corpus_row else []) + corpus[1:]),
                                         encoding="utf-8")
    return folder


# --- the hostile files from the issue, from the command line -------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("where", ["questions.jsonl", "squad questions.jsonl", "corpus.jsonl", "beir queries.jsonl"])
def test_ragkit_run_refuses_100000_nested_brackets_in_one_line(tmp_path, capsys, isolated_data_dir, where):
    if where == "beir queries.jsonl":
        dataset = write_beir(tmp_path / "set")
        with (dataset / "queries.jsonl").open("a", encoding="utf-8") as handle:
            handle.write("\n" + deep_row("text") + "\n")
        fragments = ["queries.jsonl, line 4"]
    elif where == "corpus.jsonl":
        dataset = plain_set(tmp_path / "set", corpus_row=deep_row("text"))
        fragments = ["corpus.jsonl, line 2"]
    else:
        squad = where.startswith("squad")
        dataset = plain_set(tmp_path / "set", extra_row=deep_row("answer_start" if squad else "question"), squad=squad)
        fragments = ["questions.jsonl, line 2"]
    code, err = run_cli(["run", str(experiment(tmp_path, dataset))], capsys)
    assert code == 2
    assert_one_line(err, *fragments, DEPTH_MESSAGE)
    assert files_under(isolated_data_dir) == []


@pytest.mark.integration
def test_questions_check_refuses_the_nested_row(tmp_path, capsys, isolated_data_dir):
    dataset = plain_set(tmp_path / "set", extra_row=deep_row("question"))
    code, err = run_cli(["questions", "check", str(dataset)], capsys)
    assert code == 2
    assert_one_line(err, "questions.jsonl, line 2", DEPTH_MESSAGE)
    assert files_under(isolated_data_dir) == []


IMPORT_FILES: dict[str, tuple[str, str, str]] = {
    # format, file name, text, what the message names
    "ragas jsonl": ("ragas", "set.jsonl", jsonl([{"user_input": "q?", "reference": "x"}, deep_row("reference")])),
    "ragas json": ("ragas", "set.json", '[{"user_input": "q?", "reference": "x"},\n' + deep_row("reference") + "]"),
    "llamaindex": ("llamaindex", "rag_dataset.json", '{"examples": [\n' + deep_row("query") + "]}"),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", IMPORT_FILES, ids=list(IMPORT_FILES))
def test_questions_import_refuses_the_nested_row(tmp_path, capsys, isolated_data_dir, case):
    fmt, name, text = IMPORT_FILES[case]
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    corpus = plain_set(tmp_path / "corpus")
    out = tmp_path / "out"
    code, err = run_cli(["questions", "import", str(source), "--from", fmt, "--corpus", str(corpus),
                         "--out", str(out)], capsys)
    assert code == 2
    assert_one_line(err, f"{name}, line 2", DEPTH_MESSAGE)
    assert not out.exists() and files_under(isolated_data_dir) == []


@pytest.mark.integration
def test_a_5000000_character_question_is_refused_by_name(tmp_path, capsys, isolated_data_dir):
    source = tmp_path / "set.jsonl"
    source.write_text(jsonl([{"id": "fine", "user_input": "what purrs?", "reference": "Cats"},
                             {"id": "huge", "user_input": "why " * 1_250_000, "reference": "Cats"}]),
                      encoding="utf-8")
    out = tmp_path / "out"
    code, err = run_cli(["questions", "import", str(source), "--from", "ragas",
                         "--corpus", str(plain_set(tmp_path / "corpus")), "--out", str(out)], capsys)
    assert code == 2
    assert_one_line(err, "set.jsonl, line 2", "question 'huge' is 5,000,000 characters long",
                    "over the limit of 10,000 (RAGKIT_MAX_QUESTION_CHARS)")
    assert not out.exists()


@pytest.mark.unit
def test_question_and_answer_bounds_come_from_settings(tmp_path, monkeypatch):
    path = tmp_path / "questions.jsonl"
    path.write_text(jsonl([{"id": "q1", "question": "x" * 30, "answer": "y" * 20, "relevant_doc_ids": ["d1"]}]),
                    encoding="utf-8")
    assert load_question_set(path).questions[0].text == "x" * 30  # within the defaults
    monkeypatch.setenv("RAGKIT_MAX_ANSWER_CHARS", "19")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match=r"questions.jsonl, line 1: an answer of question 'q1' is 20 characters "
                                          r"long, over the limit of 19 \(RAGKIT_MAX_ANSWER_CHARS\)"):
        load_question_set(path)
    monkeypatch.setenv("RAGKIT_MAX_QUESTION_CHARS", "29")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match=r"line 1: question 'q1' is 30 characters long, over the limit of 29"):
        load_question_set(path)


# --- the dashboard's upload --------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("name", ["questions.jsonl", "corpus.jsonl"])
def test_the_dashboard_upload_of_a_nested_row_is_refused_and_nothing_is_saved(tmp_path, isolated_data_dir, name):
    dataset = plain_set(tmp_path / "set", **({"extra_row": deep_row("question")} if name == "questions.jsonl"
                                             else {"corpus_row": deep_row("text")}))
    files = [Upload(file.name, file.read_bytes()) for file in dataset.iterdir()]
    with pytest.raises(ConfigError) as refused:
        catalogue.save_checked_question_set_uploads(files, "hostile")
    message = str(refused.value)
    assert f"{name}, line 2: invalid JSON: {DEPTH_MESSAGE}" in message and "\n" not in message
    assert files_under(isolated_data_dir) == []
    assert list(catalogue.question_sets()) == [catalogue.SAMPLE_NAME]
    # The same files without the hostile line are saved where the page loads them from.
    good = plain_set(tmp_path / "good")
    target = catalogue.save_checked_question_set_uploads(
        [Upload(file.name, file.read_bytes()) for file in good.iterdir()], "fine")
    assert target.is_relative_to(isolated_data_dir / "uploads") and (target / "questions.jsonl").is_file()


@pytest.mark.integration
def test_the_question_sets_page_shows_one_error_for_a_nested_row(tmp_path, isolated_data_dir):
    from streamlit.testing.v1 import AppTest

    dataset = plain_set(tmp_path / "set", extra_row=deep_row("question"))
    app = AppTest.from_file(str(REPO_ROOT / "dashboard" / "views" / "2_question_sets.py"), default_timeout=60).run()
    app.radio[0].set_value("Path on this machine").run()
    app.text_input[0].set_value("hostile")
    app.text_input[1].set_value(str(dataset))
    app.button[0].click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert [error.value for error in app.error] == [
        f"{dataset / 'questions.jsonl'}, line 2: invalid JSON: {DEPTH_MESSAGE}"]
    assert "hostile" not in catalogue.question_sets()


# --- answer spans ------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("text", "answer", "expected"), [
    ("a cat and a dog", "a", None),  # one character: it is anywhere
    ("it is the one", "the", None),  # a function word only
    ("Out of the box", "of the", None),
    ("Call 5 now", "5", None),
    ("concatenate the cat", "cat", (16, 19)),  # whole words: not inside "concatenate"
    ("The Cat sat", "cat", (4, 7)),  # then ignoring case
    ("COVID-19 cases", "19", (6, 8)),  # punctuation is a boundary; two characters are enough
    ("fees: $5 each", "$5", (6, 8)),  # a boundary is only needed next to a word character
    ("top_k=5", "top", None),  # the underscore joins words
    ("新型冠状病毒的疫苗研究", "疫苗", (7, 9)),  # no spaces between words: every character boundary is one
])
def test_an_answer_span_is_a_whole_word_match_that_means_something(text, answer, expected):
    assert find_answer(text, answer) == expected
    assert locatable_answer(answer) == (len(answer.strip()) >= MIN_ANSWER_CHARS and answer not in ("the", "of the"))


@pytest.mark.integration
def test_a_one_letter_reference_is_not_an_answer_span_and_the_import_says_so(tmp_path, capsys):
    context = TINY_DOCS["d1"]
    source = tmp_path / "set.jsonl"
    source.write_text(jsonl([{"id": "1", "user_input": "which letter?", "reference": "a",
                              "reference_contexts": [context]},
                             {"id": "2", "user_input": "what purrs?", "reference": "Cats",
                              "reference_contexts": [context]}]), encoding="utf-8")
    corpus = plain_set(tmp_path / "corpus")
    imported = import_question_set(source, "ragas", load_dataset_corpus_by_id(corpus))
    spans = {question.id: question.spans for question in imported.questions.questions}
    assert spans["1"] == [] and [(span.start, span.end) for span in spans["2"]] == [(0, 4)]
    assert answers_refused_as_spans(imported.questions) == 1
    code = main(["questions", "import", str(source), "--from", "ragas", "--corpus", str(corpus),
                 "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert ("2 questions imported" in out and "1 reference answers not located as spans: shorter than 2 "
            "characters or only function words" in out), out


@pytest.mark.integration
def test_questions_check_counts_answers_not_looked_for(tmp_path, capsys):
    dataset = plain_set(tmp_path / "set")
    (dataset / "questions.jsonl").write_text(jsonl([
        {"id": "q1", "question": "which letter", "answer": "a", "relevant_doc_ids": ["d1"]},
        {"id": "q2", "question": "what purrs", "answer": "Cats", "relevant_doc_ids": ["d1"]}]), encoding="utf-8")
    assert main(["questions", "check", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "answers not located as spans: 1 (shorter than 2 characters or only function words)" in out, out
    assert "answer locatable: 50% of 2" in out, out


@pytest.mark.unit
def test_a_run_logs_how_many_answers_were_not_looked_for(tmp_path, caplog):
    dataset = plain_set(tmp_path / "set")
    (dataset / "questions.jsonl").write_text(jsonl([
        {"id": "q1", "question": "which word", "answer": "of the", "relevant_doc_ids": ["d1"]},
        {"id": "q2", "question": "what purrs", "answer": "Cats", "relevant_doc_ids": ["d1"]}]), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragkit.questions.spans"):
        resolved = resolve_answer_spans(load_question_set(dataset), load_dataset_corpus_by_id(dataset))
    assert [len(question.spans) for question in resolved.questions] == [0, 1]
    assert "1 answers not looked for as spans: shorter than 2 characters or only function words" in caplog.text


def load_dataset_corpus_by_id(folder: Path) -> dict[str, object]:
    return {document.id_: document for document in load_dataset_corpus(folder) or []}


# --- the loader itself -------------------------------------------------------------------------------


@pytest.mark.unit
def test_the_json_loader_names_the_line_and_the_limit():
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert parse_json('{"a": "' + "x" * 50 + '"}', max_value_chars=50) == {"a": "x" * 50}
    cases = [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1, DEPTH_MESSAGE),
        ('{\n"a": [\n' + "[" * 2000 + "]" * 2000 + "]}", 3, DEPTH_MESSAGE),
        ('{"a": 1,\n "b": "' + "x" * 51 + '"}', 2,
         "a string of 51 characters, over the limit of 50 characters per value (RAGKIT_MAX_VALUE_CHARS)"),
        ('{"' + "k" * 51 + '": 1}', 1, "a string of 51 characters"),
        ("[1,\n" + "9" * 5000 + "]", 2, "Exceeds the limit (4300 digits)"),
        ('{"a": \n}', 2, "Expecting value (column 1)"),
    ]
    for text, line, detail in cases:
        with pytest.raises(JsonInputError) as refused:
            parse_json(text, first_line=1, max_value_chars=50)
        assert refused.value.line == line and detail in refused.value.detail, (text[:40], refused.value)
    with pytest.raises(ConfigError, match=rf"^f.jsonl, line 8: invalid JSON: {DEPTH_PATTERN}"):
        load_json(DEEP, "f.jsonl", first_line=8)


@pytest.mark.unit
def test_the_ingest_uses_the_same_loader(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n' + deep_row("b") + "\n", encoding="utf-8")
    with pytest.raises(IngestError, match=rf"invalid JSON on line 2: {DEPTH_PATTERN}"):
        ingest_jsonl(path)
    whole = tmp_path / "doc.json"
    whole.write_text('{\n"a": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(IngestError, match=rf"invalid JSON on line 2: {DEPTH_PATTERN}"):
        ingest_json(whole)


@pytest.mark.unit
def test_a_nested_review_file_is_refused(tmp_path):
    questions = tmp_path / "set.jsonl"
    questions.write_text("", encoding="utf-8")
    (tmp_path / "set.review.json").write_text('{"decisions": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"set.review.json, line 1: invalid JSON: {DEPTH_PATTERN}"):
        load_review(questions)
    (tmp_path / "set.review.json").write_text('{"decisions": {"q1": {"status": "maybe"}}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"set.review.json: 'decisions.q1.status'"):
        load_review(questions)


# --- every reader, random nesting and sizes ----------------------------------------------------------


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _docs(folder: Path) -> dict[str, object]:
    return load_dataset_corpus_by_id(plain_set(folder / "corpus"))


# reader name -> (where the hostile value goes, how the file is read); the value replaces VALUE.
READERS: dict[str, tuple[Callable[[str], tuple[str, str]], Callable[[Path, Path], object]]] = {
    "squad jsonl": (lambda v: ("questions.jsonl", jsonl([
        '{"id": "q1", "question": VALUE, "answer": "Cats", "doc_id": "d1", "answer_start": 0}'.replace("VALUE", v)])),
        lambda folder, path: load_question_set(path)),
    "plain jsonl": (lambda v: ("questions.jsonl", jsonl([
        '{"id": "q1", "question": "what purrs", "answer": VALUE, "relevant_doc_ids": ["d1"]}'.replace("VALUE", v)])),
        lambda folder, path: load_question_set(path)),
    "plain jsonl extra field": (lambda v: ("questions.jsonl", jsonl([
        '{"question": "what purrs", "relevant_doc_ids": ["d1"], "note": VALUE}'.replace("VALUE", v)])),
        lambda folder, path: load_question_set(path)),
    "csv history": (lambda v: ("questions.csv", "question,relevant_doc_ids,history\n" + '"what purrs",d1,"'
                               + v.replace('"', '""') + '"\n'),
                    lambda folder, path: load_question_set(path)),
    "squad json": (lambda v: ("squad.json", '{"data": [{"title": "t", "paragraphs": [{"context": "Cats purr.", '
                              '"qas": [{"id": "q", "question": VALUE, "answers": []}]}]}]}'.replace("VALUE", v)),
                   lambda folder, path: load_question_set(path)),
    "beir queries": (lambda v: ("queries.jsonl", jsonl(['{"_id": "q1", "text": VALUE}'.replace("VALUE", v)])),
                     lambda folder, path: load_question_set(write_beir_beside(folder, path), format="beir")),
    "dataset corpus": (lambda v: ("corpus.jsonl", jsonl(['{"_id": "d1", "text": VALUE}'.replace("VALUE", v)])),
                       lambda folder, path: load_dataset_corpus(folder)),
    "ragas jsonl": (lambda v: ("set.jsonl", jsonl(['{"user_input": "what purrs", "reference": VALUE, '
                                                   '"reference_contexts": ["Cats are"]}'.replace("VALUE", v)])),
                    lambda folder, path: import_question_set(path, "ragas", _docs(folder)).questions),
    "ragas json": (lambda v: ("set.json", '[{"user_input": VALUE}]'.replace("VALUE", v)),
                   lambda folder, path: import_question_set(path, "ragas", _docs(folder)).questions),
    "llamaindex": (lambda v: ("rag_dataset.json", '{"examples": [{"query": "what purrs", "reference_answer": "Cats", '
                              '"reference_contexts": VALUE}]}'.replace("VALUE", v)),
                   lambda folder, path: import_question_set(path, "llamaindex", _docs(folder)).questions),
    "review": (lambda v: ("set.review.json", '{"decisions": {"q1": {"status": "edited", "question": VALUE}}}'
                          .replace("VALUE", v)),
               lambda folder, path: load_review(folder / "set.jsonl")),
    "ingest jsonl": (lambda v: ("rows.jsonl", jsonl(['{"_id": "d1", "text": VALUE}'.replace("VALUE", v)])),
                     lambda folder, path: ingest_jsonl(path)),
    "ingest json": (lambda v: ("doc.json", '{"title": VALUE}'.replace("VALUE", v)),
                    lambda folder, path: ingest_json(path)),
}


def write_beir_beside(folder: Path, queries: Path) -> Path:
    beir = write_beir(folder / "beir")
    (beir / "queries.jsonl").write_bytes(queries.read_bytes())
    return beir


# Above every text the readers' small files hold besides the hostile value (TINY_DOCS: 63 at most).
VALUE_LIMIT = 100


@st.composite
def hostile_values(draw: st.DrawFn) -> str:
    """A JSON value: a string of some size, or a string inside nested lists and objects."""
    size = draw(st.sampled_from([0, 1, VALUE_LIMIT - 1, VALUE_LIMIT, VALUE_LIMIT + 1, 5 * VALUE_LIMIT]))
    value = json.dumps("x" * size)
    depth = draw(st.one_of(st.integers(0, MAX_DEPTH + 2), st.sampled_from([1000, 5000, 100_000])))
    opening, closing = draw(st.sampled_from([("[", "]"), ('{"k": ', "}")]))
    return opening * depth + value + closing * depth


@pytest.mark.unit
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
@fuzz_settings(ci=8, full=200)
@given(value=hostile_values())
def test_fuzz_every_reader_refuses_or_reads_never_crashes(monkeypatch, reader, value):
    monkeypatch.setenv("RAGKIT_MAX_VALUE_CHARS", str(VALUE_LIMIT))
    get_settings.cache_clear()
    place, read = READERS[reader]
    name, text = place(value)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        path = _write(folder, name, text)
        try:
            read(folder, path)
        except (ConfigError, IngestError) as error:
            message = str(error)
            assert "\n" not in message and len(message) <= LINE_CHARS, message[:2000]
            if value.count("[") + value.count("{") > MAX_DEPTH + 1 or '"' + "x" * (VALUE_LIMIT + 1) in value:
                assert "line" in message, message
    get_settings.cache_clear()
