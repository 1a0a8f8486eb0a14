"""Hostile and unusual PDFs, made by editing real ones that reportlab writes.

Edits that change a file's length go through ``insert_bytes``, which moves the cross-reference
table's offsets to match, so the result is still a well-formed PDF: a parser that rejects it
does so for what was inserted, not for a broken xref table.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from tests.factories import make_pdf

# pypdf's Configuration.array_maximum_element_count (its "Reached maximum array element count").
PYPDF_ARRAY_LIMIT = 100_000


def report_pdf(path: Path, pages: int = 3, lines: int = 1, title: str | None = "Quarterly report",
               author: str | None = "Finance Team") -> Path:
    """A real PDF: ``lines`` lines of distinct text per page (one line: tests.factories.make_pdf)."""
    if lines == 1:
        return make_pdf(path, [f"Page {n} reports revenue of {n * 7} million." for n in range(1, pages + 1)],
                        title=title, author=author)
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.setTitle(title or "")
    pdf.setAuthor(author or "")
    for page in range(1, pages + 1):
        for line in range(lines):
            pdf.drawString(40, 800 - 14 * line, f"Page {page} line {line}: net revenue rose {page * line % 97} percent "
                                                f"on higher volumes; operating costs fell in the quarter.")
        pdf.showPage()
    pdf.save()
    return path


def image_only_pdf(path: Path, pages: int = 2) -> Path:
    """Pages of drawings and no text at all, as a scan without OCR looks to a text extractor."""
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    for page in range(pages):
        pdf.rect(72, 400, 300, 200 + 10 * page, fill=1)
        pdf.showPage()
    pdf.save()
    return path


def insert_bytes(pdf: bytes, at: int, data: bytes) -> bytes:
    """``data`` inserted at offset ``at`` (before the xref table), with the xref offsets moved."""
    edited = pdf[:at] + data + pdf[at:]
    xref = edited.rindex(b"\nxref\n") + 1
    trailer = edited.index(b"trailer", xref)

    def moved(match: re.Match[bytes]) -> bytes:
        offset = int(match.group(1))
        return b"%010d" % (offset + len(data) if offset >= at else offset) + match.group(2)

    table = re.sub(rb"(\d{10})( \d{5} n)", moved, edited[xref:trailer])
    tail = re.sub(rb"startxref\s+(\d+)", lambda m: b"startxref\n%d" % (int(m.group(1)) + len(data)), edited[trailer:])
    return edited[:xref] + table + tail


def into_first_page(pdf: bytes, entry: bytes) -> bytes:
    """``entry`` ("/Key value") added to the first page's dictionary."""
    return insert_bytes(pdf, pdf.index(b"/Type /Page\n"), entry + b"\n  ")


def with_huge_array(pdf: bytes, elements: int = PYPDF_ARRAY_LIMIT + 1) -> bytes:
    """Valid: a page carries an array longer than pypdf's limit (as some SEC filings do)."""
    return into_first_page(pdf, b"/PieceInfo [ " + b"0 " * elements + b"]")


def with_deep_nesting(pdf: bytes, depth: int = 50_000) -> bytes:
    """A page entry nested ``depth`` arrays deep: recursive-descent parsers run out of stack."""
    return into_first_page(pdf, b"/PieceInfo " + b"[" * depth + b"]" * depth)


def with_page_tree_loop(pdf: bytes) -> bytes:
    """The page tree's root lists itself among its kids."""
    pages = re.search(rb"(\d+) 0 obj\n<<\n/Count", pdf)
    assert pages is not None, "no page tree root found"
    kids = pdf.index(b"/Kids [", pages.end()) + len(b"/Kids [")
    return insert_bytes(pdf, kids, b" " + pages.group(1) + b" 0 R")


def with_bad_object_header(pdf: bytes) -> bytes:
    """A one-byte typo ("obk") in the second page's object header: PDFium gives up, pypdf recovers."""
    second_page = re.findall(rb"\n(\d+) 0 obj\n<<\n/Contents", pdf)[1]
    return pdf.replace(b"\n%s 0 obj\n" % second_page, b"\n%s 0 obk\n" % second_page, 1)


def encrypted(pdf: bytes, password: str = "secret") -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf))
    writer.encrypt(user_password=password, owner_password=password + "-owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def endless_text(pdf: bytes, operations: int = 2_000_000) -> bytes:
    """A 30 KB file whose first page shows text two million times: seconds to minutes to extract."""
    import pypdf
    from pypdf.generic import DecodedStreamObject

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf))
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 12 Tf 72 720 Td " + b"(ab) Tj " * operations + b"ET")
    writer.pages[0].replace_contents(content.flate_encode())
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def truncated(pdf: bytes, fraction: float) -> bytes:
    return pdf[: int(len(pdf) * fraction)]
