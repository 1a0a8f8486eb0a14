"""The `ragkit` command line as a user types it (in-process through cli.main)."""

from __future__ import annotations

import pytest

from ragkit.cli import main
from tests.factories import make_pdf

MB = 1024 * 1024


@pytest.mark.integration
def test_ingest_reports_each_bad_file_and_exits_zero(tmp_path, capsys):
    folder = tmp_path / "upload"
    folder.mkdir()
    make_pdf(folder / "good.pdf", ["Camelids include llamas and alpacas."])
    make_pdf(folder / "corrupt.pdf", ["broken"])
    (folder / "corrupt.pdf").write_bytes((folder / "corrupt.pdf").read_bytes()[:200])
    (folder / "empty.txt").write_bytes(b"")
    (folder / "program.txt").write_bytes(b"MZ\x90\x00\x03\x00\x00\x00" + bytes(range(256)))
    with open(folder / "big.txt", "wb") as handle:
        handle.truncate(60 * MB)

    assert main(["ingest", str(folder), "--corpus", "mixed"]) == 0
    lines = {line.split()[1].rstrip(":"): line for line in capsys.readouterr().out.splitlines() if ":" in line}
    assert lines[str(folder / "good.pdf")].startswith("ingested")
    for name, reason in [("corrupt.pdf", "pdf"), ("empty.txt", "empty"), ("program.txt", "binary"), ("big.txt", "MB")]:
        line = lines[str(folder / name)]
        assert line.startswith("skipped") and reason.lower() in line.lower(), line

    assert main(["corpus", "list"]) == 0
    assert "mixed\t1 docs" in capsys.readouterr().out
    assert main(["corpus", "delete", "mixed"]) == 0
    capsys.readouterr()
    main(["corpus", "list"])
    assert "no corpora yet" in capsys.readouterr().out



@pytest.mark.integration
def test_corpus_docs_lists_files_and_delete_doc_removes_one(tmp_path, capsys):
    import json

    (tmp_path / "a.txt").write_text("Alpacas are smaller than llamas.", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Camels store fat.", encoding="utf-8")
    assert main(["ingest", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--corpus", "camelids"]) == 0
    capsys.readouterr()

    assert main(["corpus", "docs", "camelids"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split("\t") == ["doc_id", "file_name", "file_type", "size_bytes", "documents", "pages", "chars",
                                  "ingested"]
    assert [row.split("\t")[:7] for row in rows] == [["a.txt", "a.txt", "txt", "32", "1", "0", "32"],
                                                     ["b.txt", "b.txt", "txt", "17", "1", "0", "17"]]

    assert main(["corpus", "delete-doc", "camelids", "nope.txt"]) == 2
    assert capsys.readouterr().err.strip() == ("error: corpus 'camelids' has no document 'nope.txt'. "
                                               "Its documents: a.txt, b.txt.")
    assert main(["corpus", "delete-doc", "camelids", "a.txt"]) == 0
    assert "deleted 1 file(s) from corpus 'camelids': 1 document(s) left, new corpus id" in capsys.readouterr().out
    assert main(["corpus", "docs", "camelids", "--format", "json"]) == 0
    assert [row["doc_id"] for row in json.loads(capsys.readouterr().out)] == ["b.txt"]


@pytest.mark.integration
def test_ingest_of_only_bad_files_exits_non_zero(tmp_path, capsys):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert main(["ingest", str(tmp_path / "empty.txt"), "--corpus", "nothing"]) == 1
    assert "0 file(s) ingested" in capsys.readouterr().out


@pytest.mark.unit
def test_bad_experiment_is_a_clear_error(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("name: x\ndataset: {path: data}\nretrievers: [bm26]\n")
    assert main(["run", str(config)]) == 2
    assert "unknown retriever 'bm26'. Valid choices: bm25, dense, hybrid, mmr" in capsys.readouterr().err


@pytest.mark.unit
def test_missing_dataset_names_the_path(tmp_path, capsys):
    config = tmp_path / "e.yaml"
    config.write_text("name: x\ndataset: {path: nowhere, format: beir}\n")
    assert main(["run", str(config)]) == 2
    assert str(tmp_path / "nowhere") in capsys.readouterr().err
