"""The cost of each step of ``ragkit.pipeline.pipeline.Pipeline``: one ``stages`` row per step (``StepRecorder``).

A step is timed, and the LLM usage of the calls made during it (drained from the pipeline's
clients) and the search time its cached searches replayed are attached to it. A step inside a
step (the rerank of each attempt of a gate after rerank) is a row of its own, and the enclosing
row keeps only the rest, so no cost is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ragkit.llms.calls import LLMClient, StageUsage
from ragkit.results import USAGE_FIELDS

if TYPE_CHECKING:
    from ragkit.pipeline.trace import Trace

T = TypeVar("T")


def stage_row(stage: str, seconds: float, usage: Iterable[StageUsage], replayed_seconds: float = 0.0) -> dict[str, Any]:
    """A ``stages`` row: the step's seconds plus the LLM usage of its calls (zeros without).

    Like a reused index, which reports the time it took to build, a reply read from the cache
    counts the time it took to generate, and a search answered by the retrieval cache the time
    the search took (``replayed_seconds``): seconds is what the step costs this configuration,
    and backend_calls what this run actually sent."""
    usage = list(usage)
    row: dict[str, Any] = {"stage": stage,
                           "seconds": seconds + replayed_seconds + sum(item.replayed_seconds for item in usage)}
    for name in USAGE_FIELDS:
        row[name] = sum(getattr(item, name) for item in usage)
    # A step is cached when it made LLM calls and all were answered from the cache.
    row["cached"] = bool(usage) and all(item.cache_hit for item in usage)
    return row


@dataclass
class OpenStep:
    """A step being run: the usage and replayed search time it has had, the seconds of its inner steps."""

    usage: list[StageUsage] = field(default_factory=list)
    replayed: float = 0.0
    inner_seconds: float = 0.0

    def take(self, usage: list[StageUsage], replayed: float) -> None:
        self.usage += usage
        self.replayed += replayed


class StepRecorder:
    """The steps of a pipeline's questions as ``stages`` rows of their traces.

    ``clients``: the LLM clients whose usage a step drains; ``searchers``: the retrievers that
    search the index, which report the time their cached searches replayed."""

    def __init__(self, clients: Sequence[LLMClient] = (), searchers: Sequence[Any] = (),
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.clients = tuple(clients)
        self.searchers = tuple(searchers)
        self.clock = clock
        self._open: list[OpenStep] = []

    def forget(self) -> None:
        """Drop usage and replayed search time left over from an earlier question: they belong to
        no step of the next one."""
        self._drain()
        self._replayed()

    def _drain(self) -> list[StageUsage]:
        return [usage for client in self.clients for usage in client.drain_usage()]

    def _replayed(self) -> float:
        return sum(searcher.drain_replayed_seconds() for searcher in self.searchers)

    def run(self, trace: Trace, stage: str, work: Callable[[], T]) -> T:
        """Run ``work`` as one ``stages`` row of ``trace``. A step inside a step (the rerank of each
        attempt of a gate after rerank) is a row of its own, and the enclosing row keeps only the
        rest: its own seconds, calls and replayed searches, so no cost is counted twice."""
        if self._open:  # what the enclosing step used so far is its own
            self._open[-1].take(self._drain(), self._replayed())
        own = OpenStep()
        self._open.append(own)
        started = self.clock()
        try:
            result = work()
        finally:
            self._open.pop()
        elapsed = self.clock() - started
        if self._open:
            self._open[-1].inner_seconds += elapsed
        own.take(self._drain(), self._replayed())
        trace.stages.append(stage_row(stage, elapsed - own.inner_seconds, own.usage, own.replayed))
        return result
