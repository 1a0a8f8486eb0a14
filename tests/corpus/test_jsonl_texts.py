"""A dataset's corpus.jsonl read with its texts left in the file (``JsonlTexts``) is the corpus the
whole-text loader made: the same ids, texts, metadata and key, the same chunk set bytes; it ships
its texts when pickled (the Ray executor's plan), and a file changed under it stops the read."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from ragkit.artefacts.chunksets import build_chunkset_streamed, load_or_build_chunkset
from ragkit.chunkers import chunkers
from ragkit.corpus.jsonl_texts import JsonlTexts
from ragkit.corpus.model import Corpus, DocumentRows
from ragkit.errors import ConfigError
from ragkit.questions.corpus import _CorpusRow, dataset_corpus_rows
from ragkit.questions.rows import jsonl_rows, parse_row

pytestmark = pytest.mark.unit

ROWS = [{"_id": "d10", "title": "Ten", "text": "ten words here. " * 40},
        {"_id": "d2", "title": "", "text": "two: ü \"quoted\" \\ back\nslash"},
        {"_id": 7, "text": 12345},  # numbers read as strings, no title
        {"_id": "d1", "title": "One", "text": ""},
        {"_id": "a", "title": None, "text": "first by id " * 300}]


def write_corpus(folder: Path, rows: list[dict], bom: bool = False, newline: str = "\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    lines.insert(2, "   ")  # a blank line, skipped
    (folder / "corpus.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"")
                                          + newline.join(lines).encode("utf-8") + newline.encode())
    return folder


def whole_text_rows(folder: Path) -> DocumentRows:
    """The loader of before: every text read into memory (``jsonl_rows`` in text mode)."""
    path = folder / "corpus.jsonl"
    rows = (parse_row(_CorpusRow, obj, f"{path}, line {n}") for n, obj in jsonl_rows(path))
    return DocumentRows.from_parts((r.id, r.text, {"title": r.title} if r.title else None) for r in rows)


@pytest.mark.parametrize(("bom", "newline"), [(False, "\n"), (True, "\r\n")])
def test_texts_left_in_the_file_make_the_same_corpus(tmp_path: Path, bom: bool, newline: str) -> None:
    folder = write_corpus(tmp_path, ROWS, bom, newline)
    rows = dataset_corpus_rows(folder)
    assert rows is not None and isinstance(rows.texts, JsonlTexts)
    expected = whole_text_rows(folder)
    assert rows == expected and list(rows.texts) == list(expected.texts)
    corpus, before = Corpus.from_documents("c", rows), Corpus.from_documents("c", expected)
    assert isinstance(corpus.documents.texts, JsonlTexts)  # still in the file after sorting
    assert corpus.corpus_id == before.corpus_id and corpus.documents == before.documents
    assert [(d.id_, d.text, d.metadata) for d in corpus.documents] == \
        [(d.id_, d.text, d.metadata) for d in before.documents]
    assert [list(batch.texts) for batch in corpus.batches(2)] == [list(b.texts) for b in before.batches(2)]
    assert corpus.texts_by_id()["7"].text == "12345" and corpus.by_id()["d10"].metadata["title"] == "Ten"
    assert corpus.documents.texts[-1] == before.documents.texts[-1]


def test_the_chunk_set_is_the_same_bytes(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "data", ROWS * 1 + [{"_id": f"x{i}", "text": f"row {i} " * 50} for i in range(40)])
    lazy = Corpus.from_documents("c", dataset_corpus_rows(folder) or [])
    whole = Corpus.from_documents("c", whole_text_rows(folder))

    def chunker() -> object:
        return chunkers.build({"type": "token", "params": {"chunk_size": 64, "chunk_overlap": 8}})

    load_or_build_chunkset(tmp_path / "whole.parquet", whole, chunker)
    build_chunkset_streamed(tmp_path / "lazy.parquet", lazy, chunker, 65_536)
    load_or_build_chunkset(tmp_path / "lazy-whole.parquet", lazy, chunker)
    assert (tmp_path / "lazy.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert (tmp_path / "lazy-whole.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_pickled_it_carries_its_texts(tmp_path: Path) -> None:
    """The Ray executor puts the plan (the corpus in it) in the object store; a worker on another
    machine may not see the dataset's file, so the texts travel, as they did before."""
    folder = write_corpus(tmp_path / "data", ROWS)
    corpus = Corpus.from_documents("c", dataset_corpus_rows(folder) or [])
    shipped = pickle.loads(pickle.dumps(corpus))
    os.remove(folder / "corpus.jsonl")
    assert isinstance(shipped.documents.texts, list)
    assert shipped.documents.texts == Corpus.from_documents("c", shipped.documents).documents.texts
    assert shipped.texts_by_id()["a"].text == ROWS[4]["text"] and shipped.corpus_id == corpus.corpus_id


def test_a_file_changed_under_the_corpus_stops_the_read(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path, ROWS)
    corpus = Corpus.from_documents("c", dataset_corpus_rows(folder) or [])
    write_corpus(tmp_path, ROWS[:-1])  # another file: the offsets would read other texts
    with pytest.raises(ConfigError, match="changed while a corpus read from it was in use"):
        list(corpus.batches(2))


def test_bad_lines_name_their_line(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path, ROWS)
    with open(folder / "corpus.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"_id": "x", "text": \n')
    with pytest.raises(ConfigError, match=r"corpus.jsonl, line 7: invalid JSON"):
        dataset_corpus_rows(folder)


def test_lines_text_mode_reads_otherwise_are_read_as_before(tmp_path: Path) -> None:
    """A line of Unicode spaces is blank to ``str.strip`` (skipped), and a lone ``\\r`` ends a line
    in text mode: such a file is read whole, as the loader of before read it."""
    lines = [json.dumps(row) for row in ROWS]
    (tmp_path / "corpus.jsonl").write_bytes("\n".join([*lines[:2], "\u00a0\u2003", *lines[2:]]).encode())
    spaced = dataset_corpus_rows(tmp_path)
    assert spaced is not None and isinstance(spaced.texts, JsonlTexts) and spaced == whole_text_rows(tmp_path)
    (tmp_path / "corpus.jsonl").write_bytes("\r".join(lines).encode())
    old_mac = dataset_corpus_rows(tmp_path)
    assert old_mac is not None and isinstance(old_mac.texts, list) and old_mac == whole_text_rows(tmp_path)
    assert len(old_mac) == len(ROWS)


def test_a_duplicate_id_names_its_line(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path, [*ROWS, {"_id": "d2", "text": "again"}])
    with pytest.raises(ConfigError, match=r"line 7: duplicate document id 'd2'"):
        dataset_corpus_rows(folder)
