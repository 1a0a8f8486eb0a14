"""PDF text from two independent parsers, in a worker process with a time limit per file.

pypdfium2 (PDFium, the parser in Chrome) reads first: it is fast and reads valid files whose
large arrays trip pypdf's safety limits ("Reached maximum array element count"). pypdf is the
second opinion, asked when PDFium cannot open a file or finds no text in it; a file is called
corrupt only when both give up, and the result says which parser produced the text.

Parsing runs in a child process (``python -m ragkit.corpus.pdf``) that imports nothing but the
two parsers: PDFium is not thread-safe, and a hostile file can crash a C parser or keep one busy
for minutes. Either costs that one file: the parent waits at most ``timeout_s``, then kills the
worker and starts a fresh one for the next file. The worker is reused between files, so a batch
pays its start-up once.

Workers are lent out one per caller (``_WorkerPool``): threads that read PDFs at once (an ingest
parsing ``pdf_workers`` files in parallel) each get a process of their own, so a hostile file
still costs only its own worker, and serial reads keep reusing the one worker they warmed.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PRIMARY, SECOND_OPINION = "pypdfium2", "pypdf"
ENCRYPTED = "encrypted PDF: remove the password and upload it again"
# PDFium's error code for a document that needs a password (FPDF_ERR_PASSWORD).
_PDFIUM_PASSWORD_ERROR = 4
_WORKER_START_TIMEOUT_S = 120.0
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class PdfError(Exception):
    """A PDF whose text cannot be read; the message is the reason, worded for the user."""


@dataclass(frozen=True)
class PdfText:
    pages: list[str]
    parser: str
    title: str | None = None
    author: str | None = None


# --- the worker's side: runs in the child process -------------------------------------------------


def _clean(text: str) -> str:
    """PDFium's line breaks and soft hyphens as plain text: CRLF -> LF, U+FFFE/U+0002 -> '-'."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\ufffe", "-").replace("\x02", "-").replace("\x00", "")


def _with_pdfium(path: str) -> dict[str, Any]:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == _PDFIUM_PASSWORD_ERROR:
            return {"error": ENCRYPTED}
        raise
    try:
        pages = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            pages.append(_clean(textpage.get_text_range()))
            textpage.close()
            page.close()
        info = _metadata(lambda: _pick(document.get_metadata_dict(), "Title", "Author"))
        return {"pages": pages, "parser": PRIMARY, **info}
    finally:
        document.close()


def _with_pypdf(path: str) -> dict[str, Any]:
    import pypdf

    reader = pypdf.PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        return {"error": ENCRYPTED}
    pages = [_clean(page.extract_text() or "") for page in reader.pages]
    info = _metadata(lambda: (reader.metadata.title, reader.metadata.author) if reader.metadata else (None, None))
    return {"pages": pages, "parser": SECOND_OPINION, **info}


def _pick(info: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    return tuple(info.get(key) for key in keys)


def _metadata(read: Callable[[], tuple[Any, ...]]) -> dict[str, str | None]:
    """Title and author as plain strings; unreadable metadata is no reason to lose the text."""
    try:
        title, author = read()
    except Exception:  # noqa: BLE001  (a malformed Info dictionary, in either parser)
        return {"title": None, "author": None}
    return {"title": None if title is None else str(title), "author": None if author is None else str(author)}


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def extract(path: str) -> dict[str, Any]:
    """Pages and metadata from the first parser that finds text, or {"error": reason}."""
    failures: list[str] = []
    blank: dict[str, Any] | None = None  # a parser's result with pages but no text on any of them
    for name, parse in ((PRIMARY, _with_pdfium), (SECOND_OPINION, _with_pypdf)):
        try:
            result = parse(path)
        except Exception as error:  # noqa: BLE001  (each parser raises many types; all mean "cannot read")
            failures.append(f"{name}: {_describe(error)}"[:300])
            continue
        if "error" in result or any(page.strip() for page in result["pages"]):
            return result
        if result["pages"]:
            blank = blank or result
        else:
            failures.append(f"{name}: no pages found")
    if blank is not None:
        return {"error": (
            f"no extractable text: {len(blank['pages'])} page(s) without a text layer "
            "(a scanned or image-only PDF; run OCR on it first)"
        )}
    return {"error": "corrupt PDF: " + "; ".join(failures)}


def _serve() -> None:
    """Answer one JSON line per path read from stdin, until stdin closes."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    # Anything a parser prints (C code included) goes to stderr, never into the replies.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import pypdf  # noqa: F401  (imported before "ready", so start-up is not charged to a file)
    import pypdfium2  # noqa: F401

    replies.write("ready\n")
    replies.flush()
    for line in sys.stdin:
        replies.write(json.dumps(extract(json.loads(line))) + "\n")
        replies.flush()


# --- the parent's side ----------------------------------------------------------------------------


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)  # end of output: the worker exited


class _Worker:
    """One child process, started on first use and after a timeout or a crash."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
        process = subprocess.Popen(
            [sys.executable, "-m", "ragkit.corpus.pdf"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8", env=env,
        )
        self._process, self._lines = process, queue.Queue()
        assert process.stdout is not None
        threading.Thread(target=_pump, args=(process.stdout, self._lines), daemon=True).start()
        try:
            ready = self._next_line(_WORKER_START_TIMEOUT_S)
        except queue.Empty:
            ready = None
        if ready != "ready\n":
            self.stop()
            raise PdfError("the PDF worker process did not start")
        return process

    def _next_line(self, timeout_s: float) -> str | None:
        """The worker's next reply line; None when it exited; raises queue.Empty on timeout."""
        return self._lines.get(timeout=timeout_s)

    def read(self, path: Path, timeout_s: float) -> dict[str, Any]:
        with self._lock:
            process = self._process if self._process is not None and self._process.poll() is None else self._start()
            assert process.stdin is not None
            try:
                process.stdin.write(json.dumps(str(path)) + "\n")
                process.stdin.flush()
            except OSError:
                pass  # the worker died; the missing reply below says so
            try:
                line = self._next_line(timeout_s)
            except queue.Empty:
                self.stop()
                raise PdfError(
                    f"PDF parsing took longer than {timeout_s:g} s and was stopped (a malformed or "
                    "pathological file); raise the limit with RAGKIT_PDF_TIMEOUT_S"
                ) from None
            if line is None:
                code = process.wait()
                self._process = None
                raise PdfError(f"the PDF parser crashed on this file (worker exit code {code})")
            return json.loads(line)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None


class _WorkerPool:
    """Workers lent one per caller, made when every one is busy; the most recently returned is
    lent first, so serial reads keep using one warm process."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._every: list[_Worker] = []
        self._lock = threading.Lock()

    @contextmanager
    def lend(self) -> Iterator[_Worker]:
        with self._lock:
            if not self._idle:
                self._every.append(_Worker())
                self._idle.append(self._every[-1])
            worker = self._idle.pop()
        try:
            yield worker
        finally:
            with self._lock:
                self._idle.append(worker)

    def count(self) -> int:
        """Workers made so far: as many as callers have ever read at once."""
        with self._lock:
            return len(self._every)

    def idle(self) -> list[_Worker]:
        """The workers not lent out now, the next one to be lent last."""
        with self._lock:
            return list(self._idle)

    def stop(self) -> None:
        with self._lock:
            workers = list(self._every)
        for worker in workers:
            worker.stop()


_pool = _WorkerPool()
atexit.register(_pool.stop)


def read_pdf(path: Path, timeout_s: float) -> PdfText:
    """The text of each page of ``path``; raises PdfError with the reason when it has none.

    Safe to call from several threads at once: each call has a worker process to itself."""
    with _pool.lend() as worker:
        reply = worker.read(Path(path).resolve(), timeout_s)
    if "error" in reply:
        raise PdfError(reply["error"])
    return PdfText(pages=reply["pages"], parser=reply["parser"], title=reply["title"], author=reply["author"])


if __name__ == "__main__":
    _serve()
