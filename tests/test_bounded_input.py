"""Hostile configuration input: a YAML "billion laughs", 10 MB values, a 10 MB question id.

Each gives one line of at most 1,000 characters and exit code 2 from `ragkit run`, naming the
limit or the bad field; the YAML loader's bounds and the quoting helpers are checked on their own.
The dashboard's forms are checked in tests/dashboard/test_pages.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ragkit.cli import main
from ragkit.corpus.parsers.markdown import front_matter
from ragkit.errors import ConfigError
from ragkit.quoting import QUOTE_CHARS, clipped, quoted
from ragkit.yaml_input import MAX_ALIAS_NODES, MAX_DEPTH, load_yaml, parse_yaml
from tests.conftest import REPO_ROOT
from tests.factories import write_beir

LINE_CHARS = 1000
BIG = 10 * 1024 * 1024  # a 10 MB single-line value
# Where the same bound is checked in many places: PyYAML's pure-Python scanner reads 10 MB in
# seconds, and 1 MB is already a thousand times what a message may quote.
LARGE = 1024 * 1024


def laughs(levels: int = 8, width: int = 9, key: str = "description") -> str:
    """``key`` holding ``levels`` nested levels of ``width`` aliases each: 1 KB of YAML that
    expands to width**levels strings (8 levels of 9: 43 million, about 312 MB printed)."""
    anchors = ["a0: &l0 lol"]
    for level in range(1, levels + 1):
        anchors.append(f"a{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "x-anchors:\n" + "".join(f"  {line}\n" for line in anchors) + f"{key}: *l{levels}\n"


@pytest.fixture
def good(tmp_path) -> str:
    beir = write_beir(tmp_path / "beir")
    return f"name: tiny\ndataset: {{path: {beir}, format: beir}}\nchunkers: [document]\nembedders: []\n" \
           "retrievers: [bm25]\ntop_k: [1]\n"


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_one_bounded_line(err: str, *fragments: str) -> None:
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err[:2000]
    assert len(err.strip()) <= LINE_CHARS, (len(err), err[:2000])
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.integration
def test_a_billion_laughs_experiment_is_refused_naming_the_limit(tmp_path, good, capsys):
    path = tmp_path / "laughs.yaml"
    path.write_text(good + laughs(), encoding="utf-8")
    assert path.stat().st_size < 1024 + len(good)
    code, err = run_cli(["run", str(path)], capsys)
    assert code == 2
    assert_one_bounded_line(err, "laughs.yaml, line", f"more than {MAX_ALIAS_NODES:,} values")


BIG_VALUES = {
    "description": (lambda good, big: good + f"description: {big}\n", ["'description'", "at most 10000 characters"]),
    "top_k": (lambda good, big: good.replace("top_k: [1]", f"top_k: {big}"), ["'top_k'", "characters in all"]),
    "chunker": (lambda good, big: good.replace("[document]", f"[{big}]"), ["unknown chunker", "Valid choices"]),
    # A plain key is at most 1,024 characters in YAML: a longer one is written as `? key`.
    "key": (lambda good, big: good + f"? {big}\n: 1\n", ["unknown field", "characters in all"]),
    "key twice": (lambda good, big: good + f"? {big}\n: 1\n? {big}\n: 2\n", ["is written twice"]),
    # 30,000 bad items (each a node for PyYAML to read, so fewer than a megabyte's worth).
    "top_k list": (lambda good, big: good.replace("top_k: [1]", f"top_k: [{', '.join(['0'] * 30_000)}]"),
                   ["top_k values must be between 1 and 1000, got [0, 0, 0, 0, 0, 0, ...]"]),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", BIG_VALUES, ids=list(BIG_VALUES))
def test_a_10_mb_value_gives_one_short_line(tmp_path, good, capsys, case):
    make, fragments = BIG_VALUES[case]
    path = tmp_path / "big.yaml"
    path.write_text(make(good, "a" * (BIG if case == "description" else LARGE)), encoding="utf-8")
    code, err = run_cli(["run", str(path)], capsys)
    assert code == 2
    assert_one_bounded_line(err, *fragments)


@pytest.mark.integration
def test_a_big_set_value_gives_one_short_line(tmp_path, good, capsys):
    path = tmp_path / "good.yaml"
    path.write_text(good, encoding="utf-8")
    code, err = run_cli(["run", str(path), "--set", "top_k=" + "[" * 20 + "x" * LARGE], capsys)
    assert code == 2
    assert_one_bounded_line(err, "--set top_k: value", "characters in all", "invalid YAML")


@pytest.mark.integration
@pytest.mark.parametrize("case", ["laughs", "10 MB"])
def test_a_real_process_prints_one_short_line(tmp_path, good, isolated_data_dir, case):
    path = tmp_path / "hostile.yaml"
    path.write_text(good + (laughs() if case == "laughs" else f"description: {'a' * BIG}\n"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "ragkit.cli", "run", str(path)], capture_output=True, text=True, cwd=REPO_ROOT,
        timeout=120, check=False, env={**os.environ, "RAGKIT_DATA_DIR": str(isolated_data_dir)},
    )
    assert result.returncode == 2
    assert_one_bounded_line(result.stderr, "hostile.yaml")


@pytest.mark.integration
@pytest.mark.parametrize("layout", ["jsonl duplicate ids", "jsonl bad field", "csv"])
def test_a_question_set_with_a_10_mb_value_gives_one_short_line(tmp_path, good, capsys, layout):
    big = "q" * LARGE
    if layout == "csv":
        questions = tmp_path / "questions.csv"
        questions.write_text(f"id,question,relevant_doc_ids\n1,{big},d1\n", encoding="utf-8")
        fragments = ["questions.csv, line", "malformed CSV", "field larger than field limit"]
    else:
        questions = tmp_path / "questions.jsonl"
        rows = ([{"id": big, "question": "a?", "relevant_doc_ids": ["d1"]}] * 2 if layout == "jsonl duplicate ids"
                else [{"id": "1", "question": "a?", "relevant_doc_ids": ["d1"], "answerable": big}])
        questions.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        fragments = ["questions.jsonl", "characters in all" if layout == "jsonl duplicate ids" else "answerable"]
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: q\ndataset: {{path: {questions}}}\ncorpus: {{path: {tmp_path / 'beir' / 'corpus.jsonl'}}}\n"
                    "chunkers: [document]\nembedders: []\nretrievers: [bm25]\n", encoding="utf-8")
    code, err = run_cli(["run", str(path)], capsys)
    assert code == 2, err[:2000]
    assert_one_bounded_line(err, *fragments)


# --- the loader's bounds ---------------------------------------------------------------------------


@pytest.mark.unit
def test_aliases_up_to_the_limit_load_and_beyond_it_are_refused():
    def references(count: int) -> str:
        return f"x: &s a\ny: [{', '.join(['*s'] * count)}]\n"

    assert len(parse_yaml(references(MAX_ALIAS_NODES))["y"]) == MAX_ALIAS_NODES
    with pytest.raises(yaml.YAMLError, match=f"more than {MAX_ALIAS_NODES:,} values"):
        parse_yaml(references(MAX_ALIAS_NODES + 1))
    # Three levels of nine expand to 1,738 values in all (the anchors' own 918 and the reference's 820).
    assert len(parse_yaml(laughs(levels=3))["description"]) == 9
    with pytest.raises(yaml.YAMLError, match=f"more than {MAX_ALIAS_NODES:,} values"):
        parse_yaml(laughs(levels=4))


@pytest.mark.unit
def test_a_billion_laughs_is_refused_at_the_reference_that_crosses_the_limit():
    # Levels 1-4 add 9 + 90 + 819 + 7,380 values; the first *l4 of level 5 (line 7) adds 7,381 more.
    with pytest.raises(ConfigError, match=r"f.yaml, line 7, column 12: invalid YAML: aliases expand"):
        load_yaml(laughs(), "f.yaml")


@pytest.mark.unit
@pytest.mark.parametrize(("text", "message"), [
    ("a: &a [1, *a]\n", "alias *a is used inside the value it names"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep"),
    ("[" * 5000 + "]" * 5000, f"nested more than {MAX_DEPTH} levels deep"),
    ("x: {<<: {a: 1}, a: 2, a: 3}\n", "key 'a' is written twice"),
])
def test_the_loader_refuses_with_a_line_and_column(text, message):
    with pytest.raises(ConfigError, match=r"s, line \d+, column \d+: invalid YAML: ") as error:
        load_yaml(text, "s")
    assert message in str(error.value)


@pytest.mark.unit
def test_merge_keys_and_nesting_up_to_the_limit_load():
    data = load_yaml("base: &b {a: 1, b: 2}\nx: {<<: *b, a: 3}\n", "s")
    assert data["x"] == {"a": 3, "b": 2}
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "s") is not None


@pytest.mark.unit
def test_front_matter_with_a_billion_laughs_is_ignored():
    assert front_matter(f"---\n{laughs(key='tags')}---\n# Title\n") == {}


# --- quoting -----------------------------------------------------------------------------------------


@pytest.mark.unit
def test_quoted_and_clipped_are_bounded_and_say_how_long_the_value_was():
    assert quoted("ab") == "'ab'" and clipped("ab") == "ab"
    long = quoted("a" * BIG)
    assert len(long) == QUOTE_CHARS and long.startswith("'aaa") and long.endswith(f"({BIG:,} characters in all)")
    assert len(clipped("x" * 5000, 300)) == 300
    nested: list = ["lol"]
    for _ in range(8):
        nested = [nested] * 9
    assert len(quoted(nested)) <= QUOTE_CHARS  # printed whole, it would be 312 MB


@pytest.mark.unit
def test_a_config_error_is_clipped_whatever_its_message():
    assert len(str(ConfigError("x" * BIG))) == 1000
