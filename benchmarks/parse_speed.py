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
from dataclasses import dataclass
from pathlib import Path

from measure import Measurement

PAGES_PER_SECOND_GOAL = 200


@dataclass
class Try:
    seconds: float  # wall clock
    parent_cpu: float  # CPU seconds of this process (screening, hashing, JSON, writing the store)
    workers_cpu: float  # CPU seconds of the PDF worker processes (parsing)

    def idle_cores_seconds(self, cores: int) -> float:
        """The wall time this try's CPU would need on ``cores`` otherwise idle cores: the workers'
        share spread over the cores, but never less than the parent's own serial part."""
        return max((self.parent_cpu + self.workers_cpu) / cores, self.parent_cpu)


def children_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each live child process of this one (Linux /proc)."""
    ticks, me, found = os.sysconf("SC_CLK_TCK"), os.getpid(), {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process exited meanwhile
            continue
        if int(fields[1]) == me:  # ppid; utime and stime are fields 14 and 15 of the whole line
            found[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def ingest_seconds(folder: Path, data_dir: Path, workers: int) -> tuple[Try, int]:
    """Time and pages of ingesting ``folder`` into the new ``data_dir`` with ``workers``."""
    from ragkit.corpus.store import CorpusStore
    from ragkit.settings import get_settings

    os.environ["RAGKIT_PDF_WORKERS"] = str(workers)
    get_settings.cache_clear()
    children_before, cpu_before = children_cpu(), time.process_time()
    started = time.perf_counter()
    report = CorpusStore(data_dir).ingest([folder], "bench-parse")
    seconds = time.perf_counter() - started
    parent_cpu = time.process_time() - cpu_before
    workers_cpu = sum(cpu - children_before.get(pid, 0.0) for pid, cpu in children_cpu().items())
    skipped = [item for item in report.files if item.status == "skipped"]
    assert not skipped, skipped
    documents = CorpusStore(data_dir).load("bench-parse").documents
    pages = sum(int(document.metadata.get("pages", 0)) for document in documents)
    return Try(seconds, parent_cpu, workers_cpu), pages


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

    tries: dict[int, list[Try]] = {1: [], pool: []}
    pages = 0
    for attempt in range(repeats):
        for workers in tries:
            measured, pages = ingest_seconds(folder, scratch / f"parse-{workers}-{attempt}", workers)
            tries[workers].append(measured)
    bound_cpu = time.process_time()
    bound_seconds, bound_pages = pdfium_in_process(folder)
    bound_cpu = time.process_time() - bound_cpu
    assert bound_pages == pages, (bound_pages, pages)
    serial = min(tries[1], key=lambda measured: measured.seconds)
    parallel = min(tries[pool], key=lambda measured: measured.seconds)
    files = len(list(folder.glob("*.pdf")))
    summary = "\n".join([
        f"parse: {pages} pages in {files} PDFs of {folder} (load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores at the end)",
        *(f"parse: {workers} worker(s), tries: " + "; ".join(
            f"{t.seconds:.2f} s wall, CPU {t.parent_cpu:.2f} s ragkit + {t.workers_cpu:.2f} s workers" for t in runs)
          for workers, runs in tries.items()),
        f"parse: pypdfium2 in process {bound_seconds:.2f} s wall, {bound_cpu:.2f} s CPU",
    ])
    parallel_rate, serial_rate = pages / parallel.seconds, pages / serial.seconds
    idle_rate = pages / min(t.idle_cores_seconds(pool) for t in tries[pool])
    return [
        Measurement(f"#7 parse pages/s, {pool} workers vs 1", parallel_rate, serial_rate, "p/s",
                    f">= {PAGES_PER_SECOND_GOAL} p/s", parallel_rate >= PAGES_PER_SECOND_GOAL),
        Measurement(f"#7 same CPU on {pool} idle cores vs 1 worker", idle_rate, serial_rate, "p/s",
                    "(context)", None),
        Measurement("#7 pypdfium2 in process, pages/CPU-s vs 1 worker", pages / bound_cpu, serial_rate,
                    "p/s", "(context)", None),
    ], summary
