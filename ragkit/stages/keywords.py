"""Query expansion with the judges' keywords (``ragkit.text.keywords``)."""

from __future__ import annotations

from ragkit.text import keywords


def with_new_keywords(text: str, sources: list[str], exclude: frozenset[str] = frozenset(),
                      min_length: int = 1) -> str:
    """``text`` (whitespace collapsed) followed by the keywords of ``sources`` it lacks, each once,
    in order of appearance; words in ``exclude`` or shorter than ``min_length`` are left out."""
    present = set(keywords(text)) | exclude
    extra: list[str] = []
    for source in sources:
        for word in keywords(source):
            if word not in present and len(word) >= min_length:
                present.add(word)
                extra.append(word)
    return " ".join([" ".join(text.split()), *extra])
