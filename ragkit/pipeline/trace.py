"""What one question produced in a pipeline: ``Trace``.

Every type it names is imported for annotations only, so a module that reads or writes traces
(``ragkit.experiments.rows``) imports this one without LlamaIndex.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from ragkit.retrievers.semantic_cache import CacheLookup
    from ragkit.stages.answer.generator import Answer
    from ragkit.stages.base import Judgement

__all__ = ["Trace"]


@dataclass
class Trace:
    """Everything one question produced: final chunks, answer, judge decisions, stage costs."""

    question: str
    nodes: list[NodeWithScore] = field(default_factory=list)
    answer: Answer | None = None
    judgements: list[Judgement] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    groundedness: float | None = None
    groundedness_error: str | None = None
    # The query retrieval used (the condensed follow-up), the router's route, the answer check.
    query: str | None = None
    route: str | None = None
    answer_check: dict[str, float | None] | None = None
    answer_check_error: str | None = None
    # The semantic cache's lookups (retriever option semantic_cache), one per search.
    cache_lookups: list[CacheLookup] = field(default_factory=list)

    @property
    def abstained(self) -> bool:
        return self.answer is not None and self.answer.abstained
