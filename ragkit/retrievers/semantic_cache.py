"""The semantic retrieval cache: a query close enough to one already searched reuses its hits.

The dynamic-documents design keeps the queries it has searched with their results; a new query
whose embedding is within a cosine threshold (0.7 in the design) of a cached one is answered
with that query's hits instead of searching. It trades answers for time: a paraphrase gets the
hits of its neighbour, and so may a different question that happens to read alike. That changes
results, so the cache is an option of the retriever (``semantic_cache``, off by default), part
of the run id when on.

Scope: one cache per retriever object, which ``ragkit.experiments.assembly`` builds per run, so
the cache never crosses runs (another chunk set, retriever or parameters) and within a run it
only matches queries searched under the same document scope (a cached hit list from other
documents is never reused). It lives in memory and starts empty with the run's pipeline, so the
hit rate depends on the order the questions are asked in (the plan's order) and a Ray shard or a
resumed run starts its own. A question never reuses its own searches: the gate's reformulations,
multi-query variants and re-retrievals of one question read alike and would get its first hits
back (a retry turned into a no-op, and the hit rate inflated), so a lookup matches only entries
added before the current question began (``begin_question``). Unlike ``ragkit.retrievers.cache``
(exact searches, shared across runs and processes, results unchanged), it is by default never
written to disk.

Persistent (``semantic_cache_store: persistent``, the design's): the entries are also kept on disk
(``ragkit.retrievers.semantic_store``) per index (corpus version, chunker, embedder), retriever
and document scope, and a scope's stored entries are read before its first lookup in the run.
They are earlier questions' (earlier runs'), so every lookup sees them; a lookup that reuses one
records ``earlier_run``. A run's hits then depend on the runs before it on the same data folder:
a question asked again reuses its own earlier hits (similarity 1.0), as the design's user would.

The vectors are the query embeddings the retriever already computes (``Embedder.embed_query``,
unit vectors), so the similarity is one matrix-vector product in numpy; at a run's scale (one
entry per distinct search) an ANN index would buy nothing.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ragkit.artefacts.index import Hit
from ragkit.retrievers.semantic_store import SemanticStore


@dataclass(frozen=True)
class CacheLookup:
    """One search's lookup: a hit reused ``cached_query``'s hits; ``similarity`` is the cosine to
    the nearest cached query of the same scope (None when there was none yet)."""

    query: str
    hit: bool
    similarity: float | None
    cached_query: str | None
    threshold: float
    seconds: float
    persistent: bool = False
    earlier_run: bool = False  # persistent: the nearest entry was stored by an earlier run

    def as_decision(self) -> dict[str, object]:
        decision: dict[str, object] = {"action": "reused" if self.hit else "searched", "hit": self.hit,
                                       "similarity": self.similarity, "cached_query": self.cached_query,
                                       "threshold": self.threshold}
        if self.persistent:
            decision["earlier_run"] = self.earlier_run
        return decision


@dataclass
class _ScopeEntries:
    queries: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    hits: list[list[Hit]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # each entry's place among all the cache's additions
    stored: int = 0  # the first ``stored`` entries were read from the store (earlier runs)
    matrix: np.ndarray | None = None  # the vectors stacked, rebuilt after an addition


class SemanticCache:
    """Queries searched, with their hits, per document scope (``where``); in memory, one per run,
    and with ``store`` also on disk, in the space ``space(where)`` names."""

    def __init__(self, threshold: float, store: SemanticStore | None = None,
                 space: Callable[[str | None], str] | None = None) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"semantic cache threshold must be in (0, 1], got {threshold}")
        if (store is None) != (space is None):
            raise ValueError("a persistent semantic cache needs both its store and its space key")
        self.threshold = threshold
        self.store = store
        self._space = space
        self._scopes: dict[str | None, _ScopeEntries] = {}
        self._added = 0  # additions so far, every scope
        self._question_start = 0  # additions before the current question

    def begin_question(self) -> None:
        """A new question: from now on, what is added is hidden from lookups until the next one."""
        self._question_start = self._added

    def lookup(self, query: str, vector: np.ndarray, where: str | None) -> tuple[list[Hit] | None, CacheLookup]:
        """The hits of the nearest cached query of this scope when its cosine is at least the
        threshold (else None), and the lookup's record."""
        started = time.perf_counter()
        entries = self._entries(where) if self.store is not None else self._scopes.get(where)
        # Entries are appended in order, so those of earlier questions are a prefix.
        visible = 0 if entries is None else bisect_left(entries.order, self._question_start)
        persistent = self.store is not None
        if entries is None or not visible:
            return None, CacheLookup(query, False, None, None, self.threshold, time.perf_counter() - started,
                                     persistent)
        if entries.matrix is None:
            entries.matrix = np.vstack(entries.vectors)
        similarities = entries.matrix[:visible] @ np.asarray(vector, dtype=np.float32)
        best = int(np.argmax(similarities))
        similarity = round(float(similarities[best]), 6)
        hit = similarity >= self.threshold
        # A miss records its nearest cached query too: how far the threshold was.
        record = CacheLookup(query, hit, similarity, entries.queries[best], self.threshold,
                             time.perf_counter() - started, persistent, persistent and best < entries.stored)
        return (list(entries.hits[best]) if hit else None), record

    def _entries(self, where: str | None) -> _ScopeEntries:
        """The scope's entries, the stored ones read first (placed before every addition of this run)."""
        entries = self._scopes.get(where)
        if entries is None:
            entries = self._scopes[where] = _ScopeEntries()
            if self.store is not None and self._space is not None:
                for stored in self.store.entries(self._space(where)):
                    entries.queries.append(stored.query)
                    entries.vectors.append(stored.vector)
                    entries.hits.append(stored.hits)
                    entries.order.append(-1)
                entries.stored = len(entries.queries)
        return entries

    def add(self, query: str, vector: np.ndarray, where: str | None, hits: list[Hit]) -> None:
        entries = self._entries(where) if self.store is not None else self._scopes.setdefault(where, _ScopeEntries())
        entries.queries.append(query)
        entries.vectors.append(np.asarray(vector, dtype=np.float32))
        entries.hits.append(list(hits))
        entries.order.append(self._added)
        self._added += 1
        entries.matrix = None
        if self.store is not None and self._space is not None:
            self.store.add(self._space(where), query, vector, hits)

    def flush(self) -> int:
        """Write this run's new entries to the store (none without one); returns how many."""
        return self.store.flush() if self.store is not None else 0

    def __len__(self) -> int:
        return sum(len(entries.queries) for entries in self._scopes.values())
