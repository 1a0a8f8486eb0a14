"""The README and the guide say only what the product does: every `ragkit` command line they show
parses with the real argument parsers (an unknown command or flag fails), the generated reference
pages match the code, and the site builds without a warning (a broken link fails)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.cli import build_parser

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
# docs/index.md is the README again (generated): its lines are checked once, as the README's.
DOC_FILES = [ROOT / "README.md", *sorted(path for path in (ROOT / "docs").rglob("*.md") if path.name != "index.md")]
BLOCK = re.compile(r"```(?:bash|console|sh)\n(.*?)```", re.S)
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$")


def _command_lines(text: str) -> list[str]:
    """The `ragkit ...` lines of a page's shell blocks, continuation lines joined, comments cut."""
    found = []
    for block in BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and ENV_ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words and words[0] == "ragkit":
                found.append(" ".join(shlex.quote(word) for word in words))
    return found


def _as_arguments(line: str) -> list[str]:
    """A documented line as the arguments a user would type: `[--opt X]` is shown as given, an
    `a|b` choice as its first alternative, `X...` as one X, and an option's placeholder value in
    capitals (`--seed N`, `--max-latency-ms MS`) as 1, which every option type reads."""
    words: list[str] = []
    for word in shlex.split(line)[1:]:
        word = word.strip("[]")
        if not word:
            continue
        if "|" in word and not word.startswith(("s3://", "http")):
            word = word.split("|", 1)[0]
        word = word.removesuffix("...")
        if PLACEHOLDER.match(word) and words and words[-1].startswith("--"):
            word = "1"
        words.append(word)
    return words


def _documented() -> list[tuple[str, str]]:
    return [(str(path.relative_to(ROOT)), line)
            for path in DOC_FILES for line in _command_lines(path.read_text(encoding="utf-8"))]


def test_the_docs_show_commands_to_check():
    documented = _documented()
    assert len(documented) >= 30, documented
    assert {page for page, _ in documented} >= {"README.md"}


@pytest.mark.parametrize("page, line", _documented())
def test_every_documented_command_parses(page, line):
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(_as_arguments(line))
    except SystemExit as stop:  # argparse's way to refuse, or to end after --help
        said = (errors.getvalue().strip().splitlines() or [""])[-1]
        assert stop.code == 0, f"{page}: `{line}` does not parse: {said}"


def _reference_tool():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "_tools" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_generated_references_match_the_code():
    tool = _reference_tool()
    for name, make in tool.PAGES.items():
        committed = (ROOT / "docs" / name).read_text(encoding="utf-8")
        assert committed == make(), f"docs/{name} is out of date: run `python docs/_tools/reference.py`"


def test_the_component_reference_lists_every_parameter_with_its_bounds():
    tool = _reference_tool()
    from ragkit.chunkers.registry import chunkers

    table = "\n".join(tool.params_table(chunkers.params_model("token")))
    assert "| `chunk_size` |" in table and ">=" in table
    assert set(chunkers.builtins) <= set(re.findall(r"^### `([^`]+)`", tool.components_page(), re.M))


def test_a_line_with_an_unknown_flag_is_caught():
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        build_parser().parse_args(_as_arguments("ragkit summary DIR --no-such-flag"))
    assert isinstance(build_parser(), argparse.ArgumentParser)


def test_the_site_builds_without_warnings(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "search" / "search_index.json").exists() or \
        any((tmp_path / "site").rglob("search_index*"))
