"""Small real inputs that several test modules build: a BEIR folder, a PDF, a tiny experiment."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

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


def tiny_experiment(dataset: Path | str | Mapping[str, Any], name: str = "tiny", **fields: Any) -> dict[str, Any]:
    """An experiment config (a dict, as a user writes it) that loads no model: bm25 over whole
    documents at top 1 and 3, no embedder. ``dataset`` is a folder, or the whole ``dataset`` field
    (``{"path": ..., "format": "beir"}``); ``fields`` add or replace config fields (``top_k=[2]``,
    ``shard_size=2``, ``judges={...}``).

    >>> tiny_experiment("data/beir", top_k=[2])["top_k"]
    [2]

    ``config_from_dict`` turns it into an ExperimentConfig; ``write_experiment`` into a YAML file.
    """
    source = dict(dataset) if isinstance(dataset, Mapping) else {"path": str(dataset)}
    return {"name": name, "dataset": source, "chunkers": ["document"], "embedders": [], "retrievers": ["bm25"],
            "top_k": [1, 3], **fields}


def write_experiment(path: Path, experiment: Mapping[str, Any]) -> Path:
    """``experiment`` as a YAML file at ``path`` (what `ragkit run` reads)."""
    path.write_text(yaml.safe_dump(dict(experiment)), encoding="utf-8")
    return path


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
