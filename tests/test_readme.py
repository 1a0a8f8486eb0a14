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
