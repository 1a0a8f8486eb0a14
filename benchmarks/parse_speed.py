"""Pages per second of parsing alone: `ragkit ingest` of a folder of PDFs, 1 worker against the pool.

Each try is ``CorpusStore.ingest`` of every file of the folder into a new data dir (so nothing
comes from the parse cache): screening, hashing, parsing in the PDF worker processes, writing
each file's parsed JSON and the manifest; no chunking or embedding. One worker
(``RAGKIT_PDF_WORKERS=1``, files one after another, as before issue 32) and the pool
(``RAGKIT_PDF_WORKERS`` = the cores) take turns ``repeats`` times in the same process and each
keeps its fastest try, so a burst of load from another process is less likely to decide the
ratio. Every worker process is started before any timing.

For context, the bound of the parser itself: pypdfium2 reading the same pages in this process,
one core, no worker process, no JSON, no store.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from measure import Measurement

PAGES_PER_SECOND_GOAL = 200


def ingest_seconds(folder: Path, data_dir: Path, workers: int) -> tuple[float, int]:
    """Seconds and pages of ingesting ``folder`` into the new ``data_dir`` with ``workers``."""
    from ragkit.corpus.store import CorpusStore
    from ragkit.settings import get_settings

    os.environ["RAGKIT_PDF_WORKERS"] = str(workers)
    get_settings.cache_clear()
    started = time.perf_counter()
    report = CorpusStore(data_dir).ingest([folder], "bench-parse")
    seconds = time.perf_counter() - started
    skipped = [item for item in report.files if item.status == "skipped"]
    assert not skipped, skipped
    pages = sum(int(document.metadata.get("pages", 0)) for document in CorpusStore(data_dir).load("bench-parse").documents)
    return seconds, pages


def pdfium_in_process(folder: Path) -> tuple[float, int]:
    """Seconds and pages of pypdfium2 extracting every page of the folder's PDFs, in this process."""
    import pypdfium2 as pdfium

    started, pages = time.perf_counter(), 0
    for path in sorted(folder.glob("*.pdf")):
        document = pdfium.PdfDocument(path)
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            textpage.get_text_range()
            textpage.close()
            page.close()
            pages += 1
        document.close()
    return time.perf_counter() - started, pages


def measure_parse_speed(folder: Path, scratch: Path, repeats: int) -> tuple[list[Measurement], str]:
    """Table rows (pool against 1 worker; the parser's own bound for context) and a line of tries."""
    from ragkit.settings import available_cores

    pool = available_cores()
    warm = scratch / "parse-warm-files"
    warm.mkdir()
    for path in sorted(folder.glob("*.pdf"))[:pool]:  # one file per worker: every process started
        shutil.copyfile(path, warm / path.name)  # ingest does not follow symlinks
    ingest_seconds(warm, scratch / "parse-warm", pool)

    tries: dict[int, list[float]] = {1: [], pool: []}
    pages = 0
    for attempt in range(repeats):
        for workers in tries:
            seconds, pages = ingest_seconds(folder, scratch / f"parse-{workers}-{attempt}", workers)
            tries[workers].append(seconds)
    bound_seconds, bound_pages = pdfium_in_process(folder)
    assert bound_pages == pages, (bound_pages, pages)
    serial, parallel = pages / min(tries[1]), pages / min(tries[pool])
    files = len(list(folder.glob("*.pdf")))
    summary = (f"parse: {pages} pages in {files} PDFs of {folder}; tries (s): 1 worker "
               + " / ".join(f"{s:.2f}" for s in tries[1]) + f", {pool} workers "
               + " / ".join(f"{s:.2f}" for s in tries[pool])
               + f"; pypdfium2 in process {bound_seconds:.2f} s")
    return [
        Measurement(f"#7 parse pages/s, {pool} workers vs 1", parallel, serial, "p/s",
                    f">= {PAGES_PER_SECOND_GOAL} p/s", parallel >= PAGES_PER_SECOND_GOAL),
        Measurement("#7 context: pypdfium2 in process, 1 core vs 1 worker", pages / bound_seconds, serial,
                    "p/s", "(context)", None),
    ], summary
