"""A retriever that delegates to one of several, switchable per query.

The strategy judge and the quality gate's switch map choose among dense, bm25 and hybrid over
the same index; query transforms wrap this retriever, so whatever strategy is current when they
retrieve is the one used. The pipeline resets it to the run's own retriever before each question.

``switched`` says whether the strategy changed after the question's first search (a gate's
switch, a correction's re-retrieval with the next strategy): a transform that expands the query
without the strategy first, as the agentic design does before choosing it, names the strategy in
its prompt only then.
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
        self.searched = False  # this question has searched
        self.switched = False  # the strategy changed after the question's first search

    @property
    def names(self) -> list[str]:
        return list(self.retrievers)

    def use(self, name: str) -> None:
        if name not in self.retrievers:
            raise ValueError(f"no retrieval strategy '{name}'. Valid strategies: {', '.join(self.retrievers)}")
        if self.searched and name != self.current:
            self.switched = True
        self.current = name
        self.chosen = name

    def reset(self) -> None:
        self.current = self.default
        self.chosen = None
        self.searched = self.switched = False

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.searched = True
        return self.retrievers[self.current].retrieve(query_bundle)
