"""Pages per second of the two PDF readers ragkit uses, on one long stand-in filing.

    python benchmarks/bench_pdf_parsers.py [--pages 200] [--repeats 3]

ragkit reads a PDF with pypdfium2 first and keeps pypdf as the second opinion (ragkit.corpus.pdf):
this measures why, and what the worker process around the reader costs. One filing of ``--pages``
pages written by standin_filings (prose, a table every third page, reportlab), then, taking
turns ``--repeats`` times and keeping each side's fastest try: pypdfium2 in this process, pypdf
in this process, and ragkit's ``load_file`` (a PDF worker process started for the file, pypdfium2
in it, the text cleaned). The baseline of each row is pypdf, measured in the same run.
Characters a page are printed beside each, so a reader that is fast because it reads less shows.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import Measurement, print_table
from standin_filings import write_filing


def pdfium_chars(path: Path) -> int:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    return sum(len(document[i].get_textpage().get_text_range()) for i in range(len(document)))


def pypdf_chars(path: Path) -> int:
    import pypdf

    return sum(len(page.extract_text()) for page in pypdf.PdfReader(path).pages)


def loader_chars(path: Path) -> int:
    from ragkit.corpus.loaders import load_file

    return sum(len(document.text) for document in load_file(path, path.name))


READERS: dict[str, Callable[[Path], int]] = {
    "pypdfium2 in process": pdfium_chars,
    "pypdf in process": pypdf_chars,
    "load_file (worker process, pypdfium2)": loader_chars,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "filing.pdf"
        write_filing(path, args.pages, random.Random(0), 0)
        print(f"{args.pages} pages, {path.stat().st_size / 1e6:.1f} MB")
        best: dict[str, float] = {}
        chars: dict[str, int] = {}
        for _ in range(args.repeats):
            for name, read in READERS.items():
                started = time.perf_counter()
                chars[name] = read(path)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
    for name in READERS:
        print(f"{name:40} {args.pages / best[name]:7.0f} pages/s  {chars[name] / args.pages:6.0f} chars/page")
    baseline = args.pages / best["pypdf in process"]
    print_table([
        Measurement("pypdfium2 in process vs pypdf", args.pages / best["pypdfium2 in process"], baseline, "p/s",
                    "> 1 (why it is first)", best["pypdfium2 in process"] < best["pypdf in process"]),
        Measurement("load_file (worker, pypdfium2) vs pypdf",
                    args.pages / best["load_file (worker process, pypdfium2)"], baseline, "p/s", "-", None),
    ], baseline_name="pypdf")


if __name__ == "__main__":
    main()
