"""A retriever that delegates to one of several, switchable per query.

The strategy judge and the quality gate's switch map choose among dense, bm25 and hybrid over
the same index; query transforms wrap this retriever, so whatever strategy is current when they
retrieve is the one used. The pipeline resets it to the run's own retriever before each question.
"""

from __future__ import annotations

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle


class SwitchableRetriever(BaseRetriever):
    def __init__(self, retrievers: dict[str, BaseRetriever], default: str) -> None:
        super().__init__()
        if default not in retrievers:
            raise ValueError(f"default strategy '{default}' is not among {', '.join(retrievers)}")
        self.retrievers = dict(retrievers)
        self.default = default
        self.current = default
        # The strategy a judge or the gate chose for this question (None: the run's own, unchosen).
        self.chosen: str | None = None

    @property
    def names(self) -> list[str]:
        return list(self.retrievers)

    def use(self, name: str) -> None:
        if name not in self.retrievers:
            raise ValueError(f"no retrieval strategy '{name}'. Valid strategies: {', '.join(self.retrievers)}")
        self.current = name
        self.chosen = name

    def reset(self) -> None:
        self.current = self.default
        self.chosen = None

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrievers[self.current].retrieve(query_bundle)
