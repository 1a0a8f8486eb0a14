"""A STAND-IN for a folder of SEC filings: deterministic multi-page PDFs written with reportlab.

No real filings are on the benchmark machine (it is offline), so ``bench_ingest.py --parse-folder``
is measured on these: text-dense pages (about 55 lines of prose, roughly 4,000 characters, close
to a 10-K's narrative pages) and, on every third page, a financial table drawn as a grid of
figures, in 20 files of 50 to 150 pages by default. The same seed writes the same files byte for
byte (reportlab's ``invariant`` mode drops the creation date and the random document id).

    python benchmarks/standin_filings.py OUT_DIR [--files 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (
    "revenue operating income net margin quarter fiscal year segment customers demand pricing costs "
    "inventory supply chain liquidity capital expenditures cash flows debt covenants interest rates "
    "foreign currency exposure risk factors litigation regulatory compliance goodwill impairment "
    "depreciation amortization deferred tax assets share repurchases dividends guidance outlook "
    "headcount restructuring charges acquisitions integration synergies backlog bookings"
).split()
LINES_PER_PAGE, LINE_HEIGHT, TOP = 55, 13, 800
TABLE_ROWS = ("Net revenue", "Cost of revenue", "Gross profit", "Research and development",
              "Selling, general and administrative", "Operating income", "Interest expense",
              "Income before taxes", "Provision for income taxes", "Net income")


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def prose_lines(rng: random.Random, count: int) -> list[str]:
    """Lines of about 95 characters, filled from sentences as a typeset page would be."""
    lines, current = [], ""
    while len(lines) < count:
        current = f"{current} {sentence(rng)}".strip()
        while len(current) > 95:
            cut = current.rfind(" ", 0, 95)
            lines.append(current[:cut])
            current = current[cut + 1:]
    return lines[:count]


def draw_table(pdf, rng: random.Random, top: float) -> float:
    """A statement of operations: row labels and four years of figures; returns the next free y."""
    pdf.setFont("Helvetica-Bold", 9)
    for column, year in enumerate(("2026", "2025", "2024", "2023")):
        pdf.drawRightString(330 + 70 * column, top, year)
    pdf.setFont("Helvetica", 9)
    y = top - 14
    for label in TABLE_ROWS:
        pdf.drawString(50, y, label)
        for column in range(4):
            pdf.drawRightString(330 + 70 * column, y, f"{rng.randint(1_000, 999_999):,}")
        pdf.line(50, y - 3, 540, y - 3)
        y -= 14
    return y - 10


def write_filing(path: Path, pages: int, rng: random.Random, number: int) -> None:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), invariant=1)
    pdf.setTitle(f"Stand-in annual report {number}")
    pdf.setAuthor("ragkit benchmark (synthetic)")
    for page in range(1, pages + 1):
        y = TOP
        pdf.setFont("Helvetica-Bold", 11)
        pdf.drawString(50, y, f"Item {page % 15 + 1}. Management's discussion and analysis (page {page})")
        y -= 2 * LINE_HEIGHT
        lines = LINES_PER_PAGE
        if page % 3 == 0:
            y = draw_table(pdf, rng, y)
            lines -= 14
        pdf.setFont("Helvetica", 9)
        for line in prose_lines(rng, lines):
            pdf.drawString(50, y, line)
            y -= LINE_HEIGHT
        pdf.showPage()
    pdf.save()


def write_filings(folder: Path, files: int = 20, seed: int = 0) -> list[Path]:
    """``files`` PDFs of 50-150 pages each in ``folder``; the same seed, the same bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for number in range(files):
        path = folder / f"filing-{number:02d}.pdf"
        write_filing(path, rng.randint(50, 150), rng, number)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paths = write_filings(args.out, args.files, args.seed)
    print(f"wrote {len(paths)} stand-in filings to {args.out}")


if __name__ == "__main__":
    main()
