"""`ragkit run --out` refuses a folder of other files, naming them; `--force` writes anyway; a
ragkit results folder is resumed as before (issue 29, item 3)."""

from __future__ import annotations

import pytest

from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.results.output_folder import check_output_folder
from tests.factories import tiny_experiment, write_beir, write_experiment


def experiment_file(tmp_path) -> str:
    """A bm25 experiment over a BEIR folder, as a YAML file."""
    experiment = tiny_experiment(write_beir(tmp_path / "beir"), "out", top_k=[2])
    return str(write_experiment(tmp_path / "exp.yaml", experiment))

@pytest.mark.unit
def test_a_folder_of_other_files_is_refused_naming_the_first_few_and_how_many(tmp_path, capsys):
    out = tmp_path / "thesis"
    out.mkdir()
    for name in ("chapter1.tex", "chapter2.tex", "figures", "notes.md", "refs.bib", "zz.txt", "x" * 200):
        (out / name).write_text("mine")
    assert main(["run", experiment_file(tmp_path), "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"error: --out {out} is not empty and is not a ragkit results folder: it holds chapter1.tex, "
                    "chapter2.tex, figures, notes.md, refs.bib and 2 more (7 entries); give a new or empty folder, "
                    "or add --force to write there anyway")
    assert sorted(path.name for path in out.iterdir())[:5] == ["chapter1.tex", "chapter2.tex", "figures", "notes.md",
                                                               "refs.bib"]
    assert not (out / "runs").exists() and not (out / ".lock").exists()  # nothing written


@pytest.mark.unit
def test_new_empty_and_results_folders_are_accepted(tmp_path):
    check_output_folder(tmp_path / "new")
    check_output_folder(tmp_path)
    stopped = tmp_path / "stopped"  # a run stopped before its first file: its lock only
    stopped.mkdir()
    (stopped / ".lock").write_text("")
    check_output_folder(stopped)
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "report.md").write_text("a report written beside the results")
    check_output_folder(results)
    with pytest.raises(ConfigError, match=r"it holds \.DS_Store \(1 entry\)"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / ".DS_Store").write_text("")
        check_output_folder(tmp_path / "other")
    check_output_folder(tmp_path / "other", force=True)


@pytest.mark.integration
def test_force_writes_the_results_among_the_other_files_and_a_second_run_resumes(tmp_path, capsys):
    out = tmp_path / "mixed"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    config = experiment_file(tmp_path)
    assert main(["run", config, "--out", str(out), "--force", "--quiet"]) == 0
    assert (out / "keep.txt").read_text() == "mine" and (out / "runs").is_dir()
    capsys.readouterr()
    assert main(["run", config, "--out", str(out), "--quiet"]) == 0  # now a results folder: resumed
    assert "nothing new to compute" in capsys.readouterr().out
