"""PDFs parsed in parallel (one worker process each) give the corpus a serial ingest gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragkit.corpus import pdf as pdf_module
from ragkit.corpus.store import CorpusStore
from ragkit.settings import get_settings
from tests.corpus import pdf_samples as samples

pytestmark = pytest.mark.integration

TIMEOUT_S = 1.5


@pytest.fixture
def fresh_pool(monkeypatch: pytest.MonkeyPatch):
    """A pool of its own, so the workers counted are this test's; stopped afterwards."""
    pool = pdf_module._WorkerPool()
    monkeypatch.setattr(pdf_module, "_pool", pool)
    yield pool
    pool.stop()


def filings_folder(folder: Path) -> tuple[Path, set[str]]:
    """Readable PDFs of different lengths, hostile ones between them, and a text file; the
    hostile file names."""
    folder.mkdir()
    reports = {f"report-{n:02d}.pdf": samples.report_pdf(folder / f"report-{n:02d}.pdf", pages=2 + n, lines=3 + n,
                                                         title=f"Report {n}") for n in range(6)}
    real_pdf = reports["report-00.pdf"].read_bytes()
    hostile = {
        "encrypted.pdf": samples.encrypted(real_pdf),
        "slow.pdf": samples.endless_text(real_pdf),  # never finishes within TIMEOUT_S
        "truncated.pdf": samples.truncated(real_pdf, 0.5),
        "scan.pdf": samples.image_only_pdf(folder.parent / "scan.pdf").read_bytes(),
    }
    readable = {"big-array.pdf": samples.with_huge_array(real_pdf),
                "typo.pdf": samples.with_bad_object_header(real_pdf)}
    for name, data in {**hostile, **readable}.items():
        (folder / name).write_bytes(data)
    (folder / "notes.txt").write_text("Plain notes go in too.", encoding="utf-8")
    return folder, set(hostile)


def ingest_with(workers: int, folder: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGKIT_PDF_WORKERS", str(workers))
    monkeypatch.setenv("RAGKIT_PDF_TIMEOUT_S", str(TIMEOUT_S))
    get_settings.cache_clear()
    store = CorpusStore(data_dir)
    report = store.ingest([folder], "filings")
    return report, store.load("filings")


def test_parallel_ingest_gives_the_serial_corpus_and_names_the_bad_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_pool: pdf_module._WorkerPool
) -> None:
    folder, hostile = filings_folder(tmp_path / "filings")
    serial_report, serial = ingest_with(1, folder, tmp_path / "serial", monkeypatch)
    assert fresh_pool.count() == 1  # one file at a time: one worker, reused after the timeout's restart
    parallel_report, parallel = ingest_with(3, folder, tmp_path / "parallel", monkeypatch)
    # Three threads each borrowed a worker of their own (the serial one is among them).
    assert fresh_pool.count() == 3

    def statuses(report):
        return [(item.doc_id, item.status, item.reason, item.documents) for item in report.files]

    assert statuses(parallel_report) == statuses(serial_report)
    skipped = {item.doc_id: item.reason for item in parallel_report.files if item.status == "skipped"}
    assert set(skipped) == hostile
    assert skipped["slow.pdf"].startswith(f"PDF parsing took longer than {TIMEOUT_S:g} s")
    assert skipped["encrypted.pdf"].startswith("encrypted PDF")

    assert parallel.corpus_id == serial.corpus_id
    assert [d.id_ for d in parallel.documents] == [d.id_ for d in serial.documents]
    assert [d.text for d in parallel.documents] == [d.text for d in serial.documents]
    assert [d.metadata for d in parallel.documents] == [d.metadata for d in serial.documents]
    assert len(parallel.documents) == 9  # 6 reports, big-array, typo, notes.txt
    assert parallel.by_id()["typo.pdf"].metadata["parser"] == "pypdf"
    assert parallel.by_id()["report-05.pdf"].metadata["pages"] == 7


@pytest.mark.parametrize("value", ["0", "65", "two"])
def test_a_worker_count_out_of_bounds_is_one_line_naming_the_setting(value: str, monkeypatch) -> None:
    from ragkit.errors import ConfigError

    monkeypatch.setenv("RAGKIT_PDF_WORKERS", value)
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match=rf"^bad environment setting: RAGKIT_PDF_WORKERS: .*\(got '{value}'\)$"):
        get_settings()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux's CPU affinity")
def test_the_default_is_one_worker_per_available_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGKIT_PDF_WORKERS", raising=False)
    get_settings.cache_clear()
    assert get_settings().pdf_workers == len(os.sched_getaffinity(0))
