"""Test doubles shared by several test modules: retrievers that answer from a list, a stand-in for
the switchable retriever, and a clock moved by hand.

Each logs what it was asked, so a test asserts on the calls as well as on the result. A double used
by one module only stays in that module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode


class ListRetriever(BaseRetriever):
    """Answers each query with a fixed list of chunk ids: ``answers[query]``, else ``default``.

    Scores fall by 0.1 per rank from ``top``. A chunk's text is ``texts[chunk_id]`` when ``texts``
    is given, else ``"text of <chunk_id>"``; with ``doc_ids`` each chunk's ``doc_id`` is its own id.
    ``queries`` lists the queries asked, in order.
    """

    def __init__(self, answers: Mapping[str, Sequence[str]] | None = None, default: Sequence[str] = (), *,
                 texts: Mapping[str, str] | None = None, top: float = 1.0, doc_ids: bool = False) -> None:
        super().__init__()
        self.answers = dict(answers or {})
        self.default = list(default)
        self.texts = texts
        self.top = top
        self.doc_ids = doc_ids
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        chunk_ids = self.answers.get(query_bundle.query_str, self.default)
        return [self.chunk(chunk_id, self.top - 0.1 * rank) for rank, chunk_id in enumerate(chunk_ids)]

    def chunk(self, chunk_id: str, score: float | None = None) -> NodeWithScore:
        """The node this retriever returns for ``chunk_id``."""
        text = self.texts[chunk_id] if self.texts is not None else f"text of {chunk_id}"
        metadata = {"doc_id": chunk_id} if self.doc_ids else {}
        return NodeWithScore(node=TextNode(id_=chunk_id, text=text, metadata=metadata), score=score)


class NamedRetriever(BaseRetriever):
    """One chunk per query, with id ``<name>:<query>``, so a result shows which strategy found it
    and for which query; ``queries`` lists the queries asked."""

    def __init__(self, name: str = "docs", *, text: str | None = None, score: float = 0.9,
                 doc_id: str | None = "d1") -> None:
        super().__init__()
        self.name = name
        self.text = f"{name}: cats purr when content" if text is None else text
        self.score = score
        self.doc_id = doc_id
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        metadata = {} if self.doc_id is None else {"doc_id": self.doc_id}
        node = TextNode(id_=f"{self.name}:{query_bundle.query_str}", text=self.text, metadata=metadata)
        return [NodeWithScore(node=node, score=self.score)]


class SwitchableStub(BaseRetriever):
    """The pipeline's view of a SwitchableRetriever (``use`` / ``reset`` / ``current``) over one
    NamedRetriever per strategy in ``parts``.

    ``log`` lists the ``use <name>`` and ``reset`` calls; ``used`` the strategy of each search.
    ``reset`` returns to ``default``, the run's own retriever.
    """

    def __init__(self, default: str = "dense", names: Iterable[str] = ("dense", "bm25", "hybrid")) -> None:
        super().__init__()
        self.parts = {name: NamedRetriever(name) for name in names}
        self.default = self.current = default
        self.log: list[str] = []
        self.used: list[str] = []

    def use(self, name: str) -> None:
        self.log.append(f"use {name}")
        self.current = name

    def reset(self) -> None:
        self.log.append("reset")
        self.current = self.default

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.used.append(self.current)
        return self.parts[self.current].retrieve(query_bundle)


class FakeClock:
    """A clock that moves only when told: each reading adds ``step`` to ``now`` and returns it;
    with ``readings``, it returns them in turn instead (one reading too many is an IndexError, so
    a test also pins how often the code reads the clock).

    Callable (for a ``clock=`` argument) and with ``perf_counter`` / ``monotonic`` / ``time``, so it
    can stand in for the ``time`` module a component reads.
    """

    def __init__(self, now: float = 0.0, step: float = 0.0, readings: Iterable[float] | None = None) -> None:
        self.now = now
        self.step = step
        self.readings = None if readings is None else list(readings)

    def __call__(self) -> float:
        if self.readings is not None:
            self.now = self.readings.pop(0)
        else:
            self.now += self.step
        return self.now

    def perf_counter(self) -> float:
        return self()

    def monotonic(self) -> float:
        return self()

    def time(self) -> float:
        return self()
