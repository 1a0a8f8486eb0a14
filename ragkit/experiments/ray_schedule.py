"""The Ray executor's dispatch: steps handed to persistent workers as each becomes free.

The driver, not Ray, decides what runs where: a step goes to a free worker only once the steps
it needs have finished (an index after its chunk set, a shard after its index and its
embedder's query vectors), so no worker ever sits blocked on another's build, and steps go in
the order given (builds before shards). A worker has one step at a time; the next one is handed
to it before the finished step's result is given back (the driver commits while it computes).

A step that raises (or whose worker died) is tried again, on any worker, up to ``retries``
times; after the last try its failure is given back in place of a result.

Steps known only once another has run (the windows of a chunk set, known once it is built) are
added by ``expand``: called with each step that succeeded before anything else is handed out,
it returns the new steps (queued first) and may add their keys to the ``needs`` of steps still
queued (an index step then waits for its window steps).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)
class Step:
    """One call of a worker method: ``method(*args)``, once every key in ``needs`` is done."""

    key: Hashable
    method: str
    args: tuple
    needs: tuple[Hashable, ...] = ()
    tries: int = 0


@dataclass(frozen=True)
class Result:
    """In a step's args: the result of the step ``key`` (one of its ``needs``) as ``[object
    ref]``. A ref inside a list is not resolved by Ray, so a worker fetches the value once and
    keeps it, not once per step."""

    key: Hashable


@dataclass
class Failed:
    """A step that raised on every try: its last error."""

    error: BaseException


class Dispatcher:
    """Runs ``steps`` on ``workers`` (Ray actor handles; each call gets ``leading`` first),
    yielding each step with its result (or ``Failed``) as it finishes. ``stop`` ends what is
    still running by ending the workers."""

    def __init__(self, ray: Any, workers: list[Any], steps: list[Step], retries: int, leading: tuple = (),
                 expand: Callable[[Step, Any], list[Step]] | None = None) -> None:
        self.ray = ray
        self.expand = expand
        self.leading = leading  # arguments every call starts with (the plan's [object ref])
        self.workers = workers
        self.retries = retries
        self._queue = list(steps)
        self._running: dict[Any, tuple[Step, Any]] = {}
        self._done: set[Hashable] = set()
        self._refs: dict[Hashable, Any] = {}  # each finished step's result in the object store

    def results(self) -> Iterator[tuple[Step, Any]]:
        free = list(self.workers)
        self._hand_out(free)
        while self._running:
            (ref,), _ = self.ray.wait(list(self._running), num_returns=1)
            step, worker = self._running.pop(ref)
            free.append(worker)
            try:
                outcome: Any = self.ray.get(ref)
            except Exception as error:  # noqa: BLE001 - tried again, then given back as Failed
                step.tries += 1
                if step.tries <= self.retries:
                    self._queue.insert(0, step)
                    self._hand_out(free)
                    continue
                outcome = Failed(error)
            else:
                self._refs[step.key] = ref
                if self.expand is not None:
                    self._queue[:0] = self.expand(step, outcome)
            self._done.add(step.key)
            self._hand_out(free)  # before the caller commits this result: the workers keep busy
            yield step, outcome
        if self._queue:  # only a step needing a key no step has: a bug in the caller
            raise RuntimeError(f"steps never ready: {[step.key for step in self._queue]}")

    def _hand_out(self, free: list[Any]) -> None:
        while free:
            ready = next((step for step in self._queue if all(need in self._done for need in step.needs)), None)
            if ready is None:
                return
            self._queue.remove(ready)
            worker = free.pop(0)
            args = [[self._refs[arg.key]] if isinstance(arg, Result) else arg for arg in ready.args]
            self._running[getattr(worker, ready.method).remote(*self.leading, *args)] = (ready, worker)

    def stop(self) -> None:
        """End the workers, and with them every step still running (also on a cluster)."""
        for worker in self.workers:
            self.ray.kill(worker)
