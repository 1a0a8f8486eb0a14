"""Run chosen items of a list on worker threads, hand every result back in the list's order.

Ingest parses PDFs this way: a thread spends its time waiting for its own PDF worker process
(``ragkit.corpus.pdf``), so ``workers`` threads keep that many processes, and cores, busy, while
the caller still sees one file after another, in order, as a serial loop would. Items not chosen
run in the caller's thread when their turn comes (for them threads would only add the GIL).

Threads are started only as far ahead of the caller as ``2 * workers`` chosen items, so a slow
file holds back at most that many finished results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def in_order(
    items: Sequence[Item], work: Callable[[Item], Result], workers: int, on_thread: Callable[[Item], bool]
) -> Iterator[tuple[Item, Callable[[], Result]]]:
    """(item, get) for each item in order; ``get()`` returns ``work(item)`` or raises what it raised.

    With ``workers`` 1 every item runs in the caller's thread, exactly as a plain loop would.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1:
        for item in items:
            yield item, partial(work, item)
        return
    chosen = deque(index for index, item in enumerate(items) if on_thread(item))
    ahead: dict[int, Future[Result]] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragkit-parse") as threads:
        for index, item in enumerate(items):
            while chosen and len(ahead) < 2 * workers:
                submitted = chosen.popleft()
                ahead[submitted] = threads.submit(work, items[submitted])
            future = ahead.pop(index, None)
            yield item, (future.result if future is not None else partial(work, item))
