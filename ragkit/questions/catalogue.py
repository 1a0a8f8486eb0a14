"""The question sets a user has imported: one small JSON entry per set (name, path, format) under
``<data dir>/question_sets``, with the bundled covidqa sample always listed first.

An entry points at the set where it lives; nothing is copied. A hand-edited, broken entry is
left out of the listing rather than breaking every page that lists sets.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragkit.app.uploads import UploadedFile, inside, save_uploads
from ragkit.corpus.validation import sanitize_name
from ragkit.json_input import parse_json
from ragkit.questions import load_question_set
from ragkit.questions.corpus import load_dataset_corpus
from ragkit.questions.quality import quality_report
from ragkit.settings import get_settings

SAMPLE_QUESTION_SET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
SAMPLE_NAME = "covidqa_sample (bundled)"


def catalogue_dir(data_dir: Path | None = None) -> Path:
    """Where the entries live (also the parent of generated and frozen sets)."""
    return (data_dir or get_settings().resolved_data_dir()) / "question_sets"


def question_sets(data_dir: Path | None = None) -> dict[str, dict[str, str]]:
    """name -> {name, path, format}: the bundled sample first, then what the user imported."""
    known: dict[str, dict[str, str]] = {}
    if SAMPLE_QUESTION_SET.exists():
        known[SAMPLE_NAME] = {"name": SAMPLE_NAME, "path": str(SAMPLE_QUESTION_SET), "format": "squad"}
    folder = catalogue_dir(data_dir)
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            entry = parse_json(path.read_bytes())
            known[str(entry["name"])] = {"name": str(entry["name"]), "path": str(entry["path"]),
                                         "format": str(entry.get("format", "auto"))}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return known


def register_question_set(name: str, path: Path, format: str, data_dir: Path | None = None) -> dict[str, str]:
    """Add (or replace) the entry ``name``; its file name is sanitised and kept inside the catalogue."""
    folder = catalogue_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"name": name, "path": str(Path(path).resolve()), "format": format}
    target = inside(folder / f"{sanitize_name(name)}.json", folder)
    target.write_text(json.dumps(entry, indent=2), encoding="utf-8")
    return entry


def save_checked_question_set_uploads(files: Iterable[UploadedFile], name: str, format: str = "auto") -> Path:
    """``save_question_set_uploads`` once the files read as a question set (and their corpus.jsonl,
    if any, as a corpus) in a scratch folder outside the data directory, removed after: a set that
    cannot be read is refused with its one-line ConfigError and nothing is saved."""
    files = list(files)
    with tempfile.TemporaryDirectory(prefix="ragkit-upload-") as scratch:
        target = save_question_set_uploads(files, name, root=Path(scratch))
        load_question_set(target, format=format)
        load_dataset_corpus(target)
    return save_question_set_uploads(files, name)


def save_question_set_uploads(files: Iterable[UploadedFile], name: str, root: Path | None = None) -> Path:
    """Save the uploaded files of one set (under ``root``, default the data directory's uploads)
    and return what to load: the file when there is one, else their folder, with BEIR's
    ``<split>.tsv`` judgements moved under ``qrels/``."""
    paths = save_uploads(files, "question_sets", name, root=root)
    folder = paths[0].parent
    for path in paths:
        if path.suffix == ".tsv":
            (folder / "qrels").mkdir(exist_ok=True)
            path.replace(folder / "qrels" / path.name)
    return paths[0] if len(paths) == 1 else folder


def dataset_documents(path: str | Path) -> dict[str, Any]:
    """The documents a set ships (its corpus.jsonl or SQuAD contexts), else those of the ingested
    corpus its generation.json names, by id; empty when none."""
    from ragkit.questions.sources import set_documents

    source = set_documents(Path(path), None)
    return source.by_id() if source else {}


def question_quality(path: str | Path, format: str = "auto",
                     documents: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The quality report of a set against its own documents, as JSON-able data; None when it
    ships none. ``documents`` are the set's documents when the caller already has them."""
    documents = dataset_documents(path) if documents is None else documents
    if not documents:
        return None
    return quality_report(load_question_set(path, format=format), documents).model_dump(mode="json")


def generated_from(path: str | Path) -> str | None:
    """The corpus a set's questions were generated from, when the set ships no corpus.jsonl: the
    corpus its generation record names (for a frozen set, the record of the set it was frozen
    from); None when the set ships its own documents or records none."""
    from ragkit.questions.generation.writer import set_paths

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if (folder / "corpus.jsonl").is_file():
        return None
    for _ in range(2):  # the set itself, then the set a frozen copy came from
        record = set_paths(path)[1]
        frozen = folder / "frozen.json"
        try:
            if record.is_file():
                name = json.loads(record.read_text(encoding="utf-8")).get("corpus")
                return str(name) if name else None
            if not frozen.is_file():
                return None
            path = Path(json.loads(frozen.read_text(encoding="utf-8"))["source"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        folder = path if path.is_dir() else path.parent
    return None
