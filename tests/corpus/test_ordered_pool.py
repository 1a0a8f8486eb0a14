"""in_order: chosen items on threads, every result (or error) handed back at its own position."""

from __future__ import annotations

import threading
import time

import pytest

from ragkit.corpus.ordered_pool import in_order

pytestmark = pytest.mark.unit


def test_results_and_errors_come_back_in_the_items_order_whatever_finishes_first() -> None:
    # Later items finish first (shorter sleeps), and item 3 fails: neither may reorder the output.
    items = list(range(8))

    def work(item: int) -> int:
        time.sleep((8 - item) * 0.01)
        if item == 3:
            raise ValueError("bad item 3")
        return item * 10

    seen = []
    for item, get in in_order(items, work, workers=3, on_thread=lambda item: True):
        try:
            seen.append((item, get()))
        except ValueError as error:
            seen.append((item, str(error)))
    assert seen == [(0, 0), (1, 10), (2, 20), (3, "bad item 3"), (4, 40), (5, 50), (6, 60), (7, 70)]


def test_chosen_items_run_on_worker_threads_and_the_rest_in_the_callers_thread() -> None:
    caller = threading.current_thread().name
    threads = dict(in_order(list(range(6)), lambda item: threading.current_thread().name, workers=2,
                            on_thread=lambda item: item % 2 == 0))
    ran_on = {item: get() for item, get in threads.items()}
    assert all(ran_on[item] == caller for item in (1, 3, 5))
    assert all(ran_on[item].startswith("ragkit-parse") for item in (0, 2, 4))


def test_two_workers_run_two_items_at_once() -> None:
    # Each item waits until two are running together: without a second thread this never returns
    # within the barrier's timeout and raises BrokenBarrierError.
    together = threading.Barrier(2, timeout=10)
    results = [get() for _, get in in_order([1, 2], lambda item: together.wait() >= 0, workers=2,
                                              on_thread=lambda item: True)]
    assert results == [True, True]


def test_one_worker_is_a_plain_loop_in_the_callers_thread() -> None:
    caller = threading.current_thread().name
    assert [get() for _, get in in_order([1, 2, 3], lambda item: threading.current_thread().name, workers=1,
                                         on_thread=lambda item: True)] == [caller] * 3


def test_workers_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        list(in_order([1], str, workers=0, on_thread=lambda item: True))
