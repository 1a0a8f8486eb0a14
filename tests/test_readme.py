"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup)


def test_readme_has_exactly_two_setup_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands == ["make demo", "make test"]


def test_make_targets_do_what_the_readme_says():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_recipe = makefile.split("\ntest:", 1)[1]
    assert "python -m pytest" in test_recipe
    # The static checks run first, from the configuration in pyproject.toml.
    assert test_recipe.splitlines()[0].split() == ["install-test", "lint"]
    lint_recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "ruff check ." in lint_recipe and "\tmypy" in lint_recipe
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "[tool.ruff.lint]" in pyproject and "[tool.mypy]" in pyproject


def test_ci_runs_the_readme_test_command():
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _readme_commands()[1] in ci_lines


def test_the_runs_table_row_names_only_columns_a_run_has():
    """The guide's `runs` columns are the real ones: every plain column it names is in a run row
    (a bm25 run with a generator; `web` and `evaluation` only where a run sets them), and it
    claims no `label` column (a label is computed from the folder's runs)."""
    from ragkit.corpus.model import Corpus, make_document
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.plan import make_plan, run_row
    from ragkit.llms.base import llms
    from ragkit.questions import Question, QuestionSet

    text = (ROOT / "docs" / "guide" / "data.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `runs` |"))
    columns = row.split("|")[3].split(". No label column")[0]
    named = {name.strip("` ") for name in re.split(r",|\(|\)|/| and ", columns)}
    plain = {name for name in named if re.fullmatch(r"[a-z_]+", name)}
    corpus = Corpus.from_documents("c", [make_document("d1", "Cats purr when content. " * 5)])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    config = config_from_dict({"name": "x", "dataset": {"path": "q.jsonl"}, "retrievers": ["bm25"],
                               "generator": {"params": {"max_tokens": 80}}})
    plan = make_plan(config, corpus, questions, {"generator": llms.resolve({"type": "local"})})
    (real,) = [run_row(plan, step) for step in plan.runs]
    assert "label" not in plain and "label" not in real
    assert {"run_id", "chunker", "retriever", "top_k", "depth", "generator"} <= plain
    assert plain - {"web", "evaluation"} <= set(real), plain - set(real)
