"""Question sets as other tools make them, offline: COVID-QA articles printed to PDF, read back by
LlamaIndex's PDF reader, cut by its SentenceSplitter into reference contexts, saved as a
``LabelledRagDataset`` JSON and as a ragas test set in each layout ragas writes.

llama-index-core 0.14 no longer ships ``llama_index.core.llama_dataset``; its example model and
``save_json`` / ``from_json`` are restated here field for field from the last release that had
them, so the JSON is what LlamaIndex wrote and read.

The PDFs are what makes two parsers differ: two columns a page, a running header and footer on
every page, words hyphenated at line ends, and the "fi"/"fl" ligature glyphs where the font has
them. LlamaIndex reads them with pypdf; ragkit's ingest with PDFium.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tests.conftest import SAMPLE_DATASET

# Articles of the bundled COVID-QA sample, the first characters of each body: two pages apiece.
ARTICLES = ("2459", "2643", "1552", "2555")
BODY_CHARS = 7000
_FONT_FILES = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",)
_LIGATURES = {"fi": "\ufb01", "fl": "\ufb02"}
# A reference answer as an LLM writes one: free text, never a span of the document.
FREE_ANSWER = "In short, the passage explains this in its own words."


class CreatedBy(BaseModel):
    """LlamaIndex's ``llama_dataset.CreatedBy`` as its last release carrying the module defined it
    (llama-index-core 0.14 no longer ships ``llama_dataset``)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model_name: str | None = ""
    type: Literal["ai", "human"]


class LabelledRagDataExample(BaseModel):
    """LlamaIndex's ``llama_dataset.LabelledRagDataExample``, the same fields and types."""

    model_config = ConfigDict(extra="forbid")
    query: str
    query_by: CreatedBy | None = None
    reference_contexts: list[str] | None = None
    reference_answer: str
    reference_answer_by: CreatedBy | None = None


AI_BY = CreatedBy(type="ai", model_name="gpt-4o")


def save_labelled_rag_dataset(examples: list[LabelledRagDataExample], path: Path) -> None:
    """What ``LabelledRagDataset.save_json`` writes: ``{"examples": [model_dump, ...]}``, indent 4."""
    path.write_text(json.dumps({"examples": [example.model_dump() for example in examples]}, indent=4),
                    encoding="utf-8")


def load_labelled_rag_dataset(path: Path) -> list[LabelledRagDataExample]:
    """What ``LabelledRagDataset.from_json`` does: each example validated by the example model."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [LabelledRagDataExample.model_validate(example) for example in data["examples"]]


@dataclass(frozen=True)
class Fixture:
    pdf_folder: Path
    contexts: list[tuple[str, str]]  # (article id, reference context) in order
    llamaindex_json: Path
    ragas_jsonl: Path
    ragas_csv: Path
    ragas_hf: Path
    ragas_parquet: Path
    ligatures: bool


def article_bodies() -> dict[str, tuple[str, str]]:
    """article id -> (title, the first BODY_CHARS characters of its text)."""
    rows = [json.loads(line) for line in (SAMPLE_DATASET / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    chosen = {}
    for row in rows:
        if row["_id"] in ARTICLES:
            text = row["text"]
            body = text[text.index("Text:") + len("Text:"):].strip() if "Text:" in text else text
            chosen[row["_id"]] = (row["title"], body[:BODY_CHARS].rsplit(" ", 1)[0])
    return chosen


def _font() -> tuple[str, bool]:
    """A font name registered with reportlab and whether it draws the ligature glyphs."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    for path in _FONT_FILES:
        if Path(path).is_file():
            font = TTFont("FixtureSans", path)
            pdfmetrics.registerFont(font)
            return "FixtureSans", all(ord(glyph) in font.face.charToGlyph for glyph in _LIGATURES.values())
    return "Helvetica", False


def _lines(text: str, width: float, font: str, size: float) -> list[str]:
    """Words wrapped to ``width``; a long word that does not fit is hyphenated at the line end."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if stringWidth(candidate, font, size) <= width:
            line = candidate
            continue
        if len(word) >= 7 and word.isalpha():
            for cut in range(len(word) - 3, 2, -1):
                head = f"{line} {word[:cut]}-".strip()
                if stringWidth(head, font, size) <= width:
                    lines.append(head)
                    line = word[cut:]
                    break
            else:
                lines.append(line)
                line = word
        else:
            lines.append(line)
            line = word
    return lines + ([line] if line else [])


def write_pdf(path: Path, article: str, title: str, body: str) -> bool:
    """Two columns a page, header and footer on each; returns whether ligature glyphs were drawn."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    font, ligatures = _font()
    size, leading, margin, gutter = 9.0, 11.0, 50.0, 20.0
    page_width, page_height = letter
    column = (page_width - 2 * margin - gutter) / 2
    per_column = int((page_height - 2 * margin - 40) // leading)
    lines = _lines(body, column, font, size)
    pdf = canvas.Canvas(str(path), pagesize=letter)
    pdf.setTitle(title)
    page = 0
    while lines:
        page += 1
        pdf.setFont(font, 8)
        pdf.drawString(margin, page_height - margin + 10, f"Journal of Fixture Virology · {title[:50]}")
        pdf.setFont(font, size)
        for index in range(2):
            x = margin + index * (column + gutter)
            y = page_height - margin - 20
            for line in lines[:per_column]:
                drawn = line
                if ligatures:
                    for pair, glyph in _LIGATURES.items():
                        drawn = drawn.replace(pair, glyph)
                pdf.drawString(x, y, drawn)
                y -= leading
            lines = lines[per_column:]
        pdf.setFont(font, 8)
        pdf.drawString(margin, margin - 20, f"Article {article} · page {page}")
        pdf.showPage()
    pdf.save()
    return ligatures


def build(folder: Path, chunk_size: int = 256) -> Fixture:
    """PDFs, then LlamaIndex's contexts of them, saved in both tools' formats."""
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.readers.file import PDFReader
    from ragas import EvaluationDataset
    from ragas.dataset_schema import SingleTurnSample

    pdfs = folder / "pdfs"
    pdfs.mkdir(parents=True)
    ligatures = False
    contexts: list[tuple[str, str]] = []
    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=0)
    for article, (title, body) in article_bodies().items():
        path = pdfs / f"article-{article}.pdf"
        ligatures = write_pdf(path, article, title, body) or ligatures
        pages = PDFReader().load_data(file=path)
        contexts += [(article, node.get_content()) for node in splitter.get_nodes_from_documents(pages)]
    examples = [LabelledRagDataExample(query=f"What does passage {number} of article {article} say?", query_by=AI_BY,
                                       reference_contexts=[context], reference_answer=FREE_ANSWER,
                                       reference_answer_by=AI_BY)
                for number, (article, context) in enumerate(contexts, start=1)]
    llamaindex_json = folder / "rag_dataset.json"
    save_labelled_rag_dataset(examples, llamaindex_json)
    dataset = EvaluationDataset(samples=[
        SingleTurnSample(user_input=f"What does passage {number} of article {article} say?",
                         reference=FREE_ANSWER, reference_contexts=[context])
        for number, (article, context) in enumerate(contexts, start=1)])
    ragas_jsonl, ragas_csv = folder / "testset.jsonl", folder / "testset.csv"
    dataset.to_jsonl(str(ragas_jsonl))
    dataset.to_csv(str(ragas_csv))
    ragas_hf, ragas_parquet = folder / "testset_hf", folder / "testset.parquet"
    dataset.to_hf_dataset().save_to_disk(str(ragas_hf))
    dataset.to_pandas().to_parquet(ragas_parquet)
    return Fixture(pdfs, contexts, llamaindex_json, ragas_jsonl, ragas_csv, ragas_hf, ragas_parquet, ligatures)
