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
    """The ScriptedLLM test backend, built lazily so importing this module stays light."""
    from typing import Any, ClassVar

    from ragkit.llms import LLMBackend, LLMParams
    from ragkit.llms.base import BackendReply
    from ragkit.registry import ComponentParams

    class ScriptedParams(LLMParams):
        model: str = "scripted"

    class ScriptedLLM(LLMBackend):
        """Replies from a list in order (the last one repeats) and remembers every request."""

        name: ClassVar[str] = "scripted"
        Params: ClassVar[type[ComponentParams]] = ScriptedParams

        def __init__(self, replies: list[Any], model: str = "scripted") -> None:
            super().__init__(ScriptedParams(model=model))
            self.replies = replies
            self.requests: list[list[dict[str, str]]] = []

        def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
            self.requests.append(messages)
            text = self.replies[min(len(self.requests), len(self.replies)) - 1]
            if isinstance(text, Exception):
                raise text
            return BackendReply(text=text, prompt_tokens=1, completion_tokens=1)

    return ScriptedLLM
