"""PDFs: PDFium first, pypdf as the second opinion, hostile files named and skipped under a time limit."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ragkit.corpus import pdf as pdf_module
from ragkit.corpus.loaders import load_file
from ragkit.corpus.store import CorpusStore
from ragkit.errors import IngestError
from ragkit.settings import get_settings
from tests.corpus import pdf_samples as samples

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real_pdf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return samples.report_pdf(tmp_path_factory.mktemp("pdf") / "report.pdf").read_bytes()


@pytest.fixture(scope="module")
def endless_pdf(real_pdf: bytes) -> bytes:
    return samples.endless_text(real_pdf)


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv("RAGKIT_PDF_TIMEOUT_S", "1.5")
    get_settings.cache_clear()
    return 1.5


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_pdfium_reads_text_title_author_and_page_starts(tmp_path: Path, real_pdf: bytes) -> None:
    [document] = load_file(write(tmp_path / "report.pdf", real_pdf), "q1/report.pdf")
    assert document.metadata["parser"] == "pypdfium2"
    assert document.metadata["title"] == "Quarterly report" and document.metadata["author"] == "Finance Team"
    assert document.metadata["pages"] == 3
    for number, start in enumerate(document.metadata["page_starts"], start=1):
        assert document.text[start:].startswith(f"Page {number} reports revenue")


def test_a_valid_pdf_with_an_array_over_pypdfs_limit_is_read(tmp_path: Path, real_pdf: bytes) -> None:
    import pypdf
    from pypdf.errors import LimitReachedError

    path = write(tmp_path / "filing.pdf", samples.with_huge_array(real_pdf))
    with pytest.raises(LimitReachedError, match="maximum array element count"):
        [page.extract_text() for page in pypdf.PdfReader(path).pages]
    [document] = load_file(path, "filing.pdf")
    assert document.metadata["parser"] == "pypdfium2" and "Page 3 reports revenue" in document.text


def test_pypdf_reads_what_pdfium_gives_up_on_and_the_loader_says_so(tmp_path: Path, real_pdf: bytes) -> None:
    import pypdfium2

    path = write(tmp_path / "typo.pdf", samples.with_bad_object_header(real_pdf))
    with pytest.raises(pypdfium2.PdfiumError):
        document = pypdfium2.PdfDocument(path)
        [document[index].get_textpage().get_text_range() for index in range(len(document))]
    [document] = load_file(path, "typo.pdf")
    assert document.metadata["parser"] == "pypdf"
    assert all(f"Page {n} reports revenue" in document.text for n in (1, 2, 3))


def test_corrupt_means_both_parsers_failed_and_names_each_reason(tmp_path: Path, real_pdf: bytes) -> None:
    for fraction in (0.05, 0.5, 0.9):
        path = write(tmp_path / f"cut{fraction}.pdf", samples.truncated(real_pdf, fraction))
        with pytest.raises(IngestError, match=r"^corrupt PDF: pypdfium2: .+; pypdf: .+"):
            load_file(path, path.name)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda pdf, folder: samples.encrypted(pdf), r"^encrypted PDF: remove the password"),
        (lambda pdf, folder: samples.image_only_pdf(folder / "scan.pdf").read_bytes(),
         r"^no extractable text: 2 page\(s\) without a text layer .*run OCR"),
    ],
    ids=["encrypted", "image-only"],
)
def test_unreadable_pdfs_get_a_reason_a_user_can_act_on(tmp_path: Path, real_pdf: bytes, make, reason: str) -> None:
    path = write(tmp_path / "odd.pdf", make(real_pdf, tmp_path))
    with pytest.raises(IngestError, match=reason):
        load_file(path, "odd.pdf")


@pytest.mark.parametrize("edit", [samples.with_deep_nesting, samples.with_page_tree_loop], ids=["deep", "loop"])
def test_structures_that_trip_pypdf_are_read_by_pdfium(tmp_path: Path, real_pdf: bytes, edit) -> None:
    [document] = load_file(write(tmp_path / "odd.pdf", edit(real_pdf)), "odd.pdf")
    assert document.metadata["parser"] == "pypdfium2" and "Page 2 reports revenue" in document.text


def test_a_pdf_that_keeps_the_parser_busy_is_stopped_and_the_next_one_parses(
    tmp_path: Path, real_pdf: bytes, endless_pdf: bytes, short_timeout: float
) -> None:
    slow = write(tmp_path / "slow.pdf", endless_pdf)
    # The file never finishes parsing: returning at all, with this message, is the timeout at work.
    with pytest.raises(IngestError, match=r"^PDF parsing took longer than 1.5 s .*RAGKIT_PDF_TIMEOUT_S"):
        load_file(slow, "slow.pdf")
    [document] = load_file(write(tmp_path / "fine.pdf", real_pdf), "fine.pdf")
    assert document.metadata["parser"] == "pypdfium2"


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL")
def test_a_crashed_parser_costs_one_file(
    tmp_path: Path, real_pdf: bytes, endless_pdf: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_file(write(tmp_path / "warm.pdf", real_pdf), "warm.pdf")  # the worker is running
    worker = pdf_module._pool.idle()[-1]  # the one the next serial read is lent
    pid = worker.pid()
    assert pid is not None
    # As a segfault in PDFium would: the worker dies once it has the file and the parent waits for
    # its reply (the file never finishes parsing, so this is while it parses), never before.
    wait_for_reply, killed = worker._next_line, []

    def killed_while_parsing(timeout_s: float) -> str | None:
        if not killed:  # only this file: the next one is read by a new worker
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return wait_for_reply(timeout_s)

    monkeypatch.setattr(worker, "_next_line", killed_while_parsing)
    with pytest.raises(IngestError, match=r"^the PDF parser crashed on this file \(worker exit code -9\)"):
        load_file(write(tmp_path / "slow.pdf", endless_pdf), "slow.pdf")
    assert load_file(write(tmp_path / "after.pdf", real_pdf), "after.pdf")[0].metadata["parser"] == "pypdfium2"


def test_a_batch_of_hostile_pdfs_names_each_and_ingests_the_rest(
    tmp_path: Path, real_pdf: bytes, endless_pdf: bytes, short_timeout: float
) -> None:
    folder = tmp_path / "filings"
    folder.mkdir()
    hostile = {
        "encrypted.pdf": samples.encrypted(real_pdf),
        "truncated.pdf": samples.truncated(real_pdf, 0.5),
        "scan.pdf": samples.image_only_pdf(tmp_path / "scan.pdf").read_bytes(),
        "slow.pdf": endless_pdf,
    }
    readable = {
        "big-array.pdf": samples.with_huge_array(real_pdf),
        "deep.pdf": samples.with_deep_nesting(real_pdf),
        "loop.pdf": samples.with_page_tree_loop(real_pdf),
        "typo.pdf": samples.with_bad_object_header(real_pdf),
        "report.pdf": real_pdf,
    }
    for name, data in {**hostile, **readable}.items():
        write(folder / name, data)
    (folder / "notes.txt").write_text("Plain notes go in too.", encoding="utf-8")
    report = CorpusStore().ingest([folder], "filings")  # returns at all: slow.pdf never finishes parsing
    statuses = {item.doc_id: item for item in report.files}
    assert {doc_id for doc_id, item in statuses.items() if item.status == "skipped"} == set(hostile)
    assert all(statuses[name].reason for name in hostile)
    assert statuses["slow.pdf"].reason.startswith("PDF parsing took longer than 1.5 s")
    corpus = CorpusStore().load("filings").by_id()
    assert sorted(corpus) == sorted([*readable, "notes.txt"])
    assert corpus["typo.pdf"].metadata["parser"] == "pypdf"
