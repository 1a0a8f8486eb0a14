"""What one execution of a plan computed, and the callback it reports progress through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ragkit.results.integrity import DamagedPart

# (event, amount): "questions" advanced, "embedded" chunks, "index_started" (its chunks), "index_built"
Progress = Callable[[str, int], None]


def no_progress(event: str, amount: int) -> None:
    """A Progress that reports nothing (a worker's builds, a serving pipeline's index)."""


@dataclass
class ExecutionReport:
    runs_total: int = 0
    runs_computed: int = 0
    questions_computed: int = 0
    chunks_embedded: int = 0
    chunksets_built: int = 0
    indexes_built: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Committed parts found damaged or missing at the start and set aside (ragkit.results.integrity):
    # their questions were uncommitted, so this execution answered them again.
    set_aside: list[DamagedPart] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return self.runs_computed == 0
