"""Small real inputs that several test modules build: a BEIR folder, a PDF."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

TINY_DOCS = {
    "d1": "Cats are small furry animals that purr. They like to eat fish.",
    "d2": "Dogs bark loudly and love long walks in the park.",
    "d3": "The sun is a star at the centre of the solar system.",
}
# question id -> (question text, relevant doc id)
TINY_QUESTIONS = {
    "q1": ("what animal purrs", "d1"),
    "q2": ("which animal barks", "d2"),
    "q3": ("what is the sun", "d3"),
}


def write_beir(
    folder: Path,
    docs: Mapping[str, str] = TINY_DOCS,
    questions: Mapping[str, tuple[str, str]] = TINY_QUESTIONS,
) -> Path:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv); titles are the first word."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": v.split()[0], "text": v}) for k, v in docs.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "text": v[0]}) for k, v in questions.items()), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{v[1]}\t1\n" for k, v in questions.items()), encoding="utf-8")
    return folder


def make_pdf(path: Path, pages: list[str], title: str | None = None, author: str | None = None) -> Path:
    """A real PDF (reportlab) with one line of text per page."""
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    if title:
        pdf.setTitle(title)
    if author:
        pdf.setAuthor(author)
    for text in pages:
        pdf.drawString(72, 720, text)
        pdf.showPage()
    pdf.save()
    return path


def scripted_llm_class():
    """The shared ScriptedLLM (tests/scripted_llm.py), imported lazily so this module stays light."""
    from tests.scripted_llm import ScriptedLLM

    return ScriptedLLM
