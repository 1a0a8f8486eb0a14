"""Per-file-type size rules of the Chunking Judge: the chosen chunk size and overlap scaled by
the document's file type (e.g. a design's ``.txt`` x3 size / x2 overlap, ``.csv`` x2 size).

A rule applies only to what the judge chose, never to its fallback (the judge-off chunker), and
only to a chunker whose size is ``chunk_size`` / ``chunk_overlap``; anything else is recorded as
not applied with the reason, so the decision says exactly what was cut with what.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragkit.registry import ComponentSpec


class SizeRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    size: float = Field(default=1.0, gt=0, le=20, description="Factor on the chosen chunk_size.")
    overlap: float = Field(default=1.0, ge=0, le=20, description="Factor on the chosen chunk_overlap.")


def check_suffixes(rules: dict[str, SizeRule]) -> dict[str, SizeRule]:
    """Keys are file suffixes written as ``.txt`` (lower case), so a rule cannot silently miss."""
    bad = [key for key in rules if not key.startswith(".") or key != key.lower() or len(key) < 2]
    if bad:
        raise ValueError(f"size_rules keys must be lower-case file suffixes like '.txt', got {bad}")
    return rules


def file_suffix(metadata: dict[str, Any], doc_id: str) -> str:
    """The document's file suffix, lower case ('' when it has none): its file name, else its id."""
    return PurePosixPath(str(metadata.get("file_name") or doc_id or "")).suffix.lower()


def scaled(spec: ComponentSpec, rule: SizeRule) -> dict[str, Any]:
    """``spec`` with chunk_size and chunk_overlap scaled (rounded to whole units), as a raw spec
    for ``chunkers.resolve`` to validate; KeyError when the chunker has no chunk_size."""
    params = dict(spec.params)
    size = params["chunk_size"]
    params["chunk_size"] = round(size * rule.size)
    if "chunk_overlap" in params:
        params["chunk_overlap"] = round(params["chunk_overlap"] * rule.overlap)
    return {"type": spec.type, "params": params}

