"""The question-set catalogue: entries under the data directory, the bundled sample first, broken
entries left out, names that cannot leave the catalogue, and uploaded BEIR files put in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.questions import catalogue
from tests.factories import TINY_DOCS, TINY_QUESTIONS, write_beir

pytestmark = pytest.mark.unit


class Upload:
    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def test_the_bundled_sample_comes_first_then_registered_sets_by_entry_name(isolated_data_dir, tmp_path):
    catalogue.register_question_set("zeta", tmp_path / "z", "beir")
    catalogue.register_question_set("alpha", tmp_path / "a", "squad")
    known = catalogue.question_sets()
    assert list(known) == [catalogue.SAMPLE_NAME, "alpha", "zeta"]
    assert known[catalogue.SAMPLE_NAME] == {"name": catalogue.SAMPLE_NAME, "format": "squad",
                                            "path": str(catalogue.SAMPLE_QUESTION_SET)}
    assert known["alpha"] == {"name": "alpha", "path": str((tmp_path / "a").resolve()), "format": "squad"}
    assert catalogue.catalogue_dir() == isolated_data_dir / "question_sets"


def test_a_broken_entry_is_left_out_and_a_missing_format_reads_auto(isolated_data_dir):
    folder = catalogue.catalogue_dir()
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    (folder / "nameless.json").write_text(json.dumps({"path": "/x"}), encoding="utf-8")
    (folder / "plain.json").write_text(json.dumps({"name": "plain", "path": "/p"}), encoding="utf-8")
    assert list(catalogue.question_sets()) == [catalogue.SAMPLE_NAME, "plain"]
    assert catalogue.question_sets()["plain"]["format"] == "auto"


def test_a_hostile_name_is_sanitised_into_the_catalogue_and_kept_as_given(isolated_data_dir, tmp_path):
    catalogue.register_question_set("../../escape", tmp_path, "auto")
    (entry,) = catalogue.catalogue_dir().iterdir()
    assert entry.parent == catalogue.catalogue_dir() and ".." not in entry.name
    assert "../../escape" in catalogue.question_sets()
    assert not (isolated_data_dir.parent / "escape.json").exists()


def test_uploaded_beir_files_get_their_qrels_folder_and_one_file_is_itself(isolated_data_dir, tmp_path):
    source = write_beir(tmp_path / "beir")
    files = [Upload(name, (source / name).read_bytes()) for name in ("corpus.jsonl", "queries.jsonl")]
    files.append(Upload("test.tsv", (source / "qrels" / "test.tsv").read_bytes()))
    target = catalogue.save_question_set_uploads(files, "mine")
    assert target.is_dir() and (target / "qrels" / "test.tsv").is_file() and not (target / "test.tsv").exists()
    assert target.is_relative_to(isolated_data_dir / "uploads")
    single = catalogue.save_question_set_uploads([Upload("set.jsonl", b"{}")], "one")
    assert single.name == "set.jsonl" and single.is_file()


def test_quality_is_measured_against_the_sets_own_corpus_and_none_without_one(tmp_path):
    beir = write_beir(tmp_path / "beir")
    assert set(catalogue.dataset_documents(beir)) == set(TINY_DOCS)
    assert catalogue.question_quality(beir, "beir", documents={}) is None  # the documents given are used
    quality = catalogue.question_quality(beir, "beir")
    assert quality is not None and quality["questions"] == len(TINY_QUESTIONS)
    assert quality["documents_without_questions"] == 0.0
    (beir / "corpus.jsonl").unlink()
    assert catalogue.dataset_documents(beir) == {}
    assert catalogue.question_quality(beir, "beir") is None


def test_the_bundled_sample_ships_where_the_catalogue_says(tmp_path):
    assert Path(catalogue.SAMPLE_QUESTION_SET).is_dir()
