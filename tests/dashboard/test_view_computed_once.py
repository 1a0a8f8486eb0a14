"""A view asked by several sessions at once is computed once (issue 29, item 5).

Streamlit's ``st.cache_data`` holds a lock per cache key while it computes, so callers asking for
the same key wait for the first one and read its value. That dedupes sessions only when they build
the same key: ``state.view`` keys by the folder, its stamp, the view's name, the runs and the
arguments, so a stamp that depended on the moment of asking (as it did: a folder changed less than
``QUIET_FOLDER_S`` ago was stamped differently from one changed before) gave sessions straddling
that moment two keys and two computations. Threads stand in for sessions: Streamlit serves each
session's script run on its own thread, and outside a script run the cache is the same code.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pandas as pd
import pytest
from streamlit.runtime.caching import cache_utils

import ragkit.analysis
from dashboard import state
from ragkit.analysis.views import VIEWS
from ragkit.results import ResultStore
from ragkit.storage import folder_stamps
from tests.analysis.helpers import run_row, score_rows

pytestmark = pytest.mark.unit

SESSIONS = 8
# A guard against a hang, not a measured time: every caller asks within milliseconds.
ALL_ASKED_TIMEOUT_S = 30


class CountingView:
    """A view that counts its computations and holds the first until every session has asked."""

    def __init__(self, sessions: int) -> None:
        self.computations = 0
        self.asked = 0
        self.all_asked = threading.Event()
        self.release = self.all_asked  # what a computation waits for
        self.all_asked_in_time: list[bool] = []
        self._lock = threading.Lock()
        self._sessions = sessions

    def ask(self) -> None:
        with self._lock:
            self.asked += 1
            if self.asked == self._sessions:
                self.all_asked.set()

    def __call__(self, results, metric: str) -> pd.DataFrame:
        with self._lock:
            self.computations += 1
        self.all_asked_in_time.append(self.release.wait(ALL_ASKED_TIMEOUT_S))
        return results.scores[results.scores["metric"] == metric].reset_index(drop=True)


@pytest.fixture
def experiment(isolated_data_dir, monkeypatch) -> tuple[str, CountingView, list[str]]:
    """A results folder of two runs under the data dir, a counting view, and the folders load_results read."""
    name = "concurrent"
    store = ResultStore(isolated_data_dir / "results" / name)
    for run_id in ("r1", "r2"):
        store.write_run(run_id, run_row(run_id, chunker=f"c{run_id}"))
        store.commit_shard(run_id, ["q1", "q2"], {"scores": score_rows([(run_id, "q1", "mrr", 1.0),
                                                                          (run_id, "q2", "mrr", 0.5)])})
    counting = CountingView(SESSIONS)
    monkeypatch.setitem(VIEWS, "counting", counting)
    loads: list[str] = []
    real_load = ragkit.analysis.load_results

    def counting_load(folder):
        loads.append(str(folder))
        return real_load(folder)

    monkeypatch.setattr(ragkit.analysis, "load_results", counting_load)
    return name, counting, loads


def ask_at_once(name: str, counting: CountingView, clock_of_session=None) -> list[pd.DataFrame]:
    """Every session calls ``state.view`` on its own thread; the values they got, in session order
    (an error in a session is raised here)."""

    def session(number: int) -> pd.DataFrame:
        if clock_of_session is not None:
            clock_of_session(number)
        counting.ask()
        return state.view("counting", name, None, "mrr")

    with ThreadPoolExecutor(max_workers=SESSIONS) as sessions:
        return list(sessions.map(session, range(SESSIONS)))


def test_sessions_asking_for_one_view_at_once_compute_it_once(experiment):
    name, counting, loads = experiment
    values = ask_at_once(name, counting)
    assert counting.computations == 1
    assert counting.all_asked_in_time == [True]  # every session asked while it was being computed
    assert len(loads) == 1  # the results folder was read once too
    assert all(value.equals(values[0]) for value in values) and list(values[0]["value"]) == [1.0, 0.5, 1.0, 0.5]


def test_sessions_before_and_after_the_folder_turns_quiet_compute_it_once(experiment, monkeypatch):
    """Half the sessions see the folder changed 0.5 s ago, half 20 s ago: one folder state, one key."""
    name, counting, loads = experiment
    changed = (state.results_root() / name / "_commits").stat().st_mtime_ns / 1e9
    seen = threading.local()

    def clock_of_session(number: int) -> None:
        seen.now = changed + (0.5 if number % 2 else 10 * folder_stamps.QUIET_FOLDER_S)

    monkeypatch.setattr(folder_stamps, "time", SimpleNamespace(time=lambda: seen.now))
    ask_at_once(name, counting, clock_of_session)
    assert counting.computations == 1
    assert len(loads) == 1


def test_a_view_of_an_unchanged_folder_is_not_computed_again_however_long_after(experiment, monkeypatch):
    """Keyed by the folder's state, a view stays right while the folder is unchanged: asked long
    after (10 ttls of the other caches), it is served without a computation, in the foreground or
    in the background (a background refresh of it recomputed the same value every 30 s)."""
    name, counting, loads = experiment
    # The caches' storage reads the clock it was made with: made here, before the clock is replaced.
    state.view("metric_names", name, None)
    clock = [1000.0]
    monkeypatch.setattr(cache_utils, "TTLCACHE_TIMER", lambda: clock[0])
    counting.all_asked.set()  # no computation need wait
    first = state.view("counting", name, None, "mrr")
    computed_again = threading.Event()
    counting.release = computed_again  # a second computation, if any, says so and goes on
    clock[0] += 10 * state.DATA_TTL_S
    values = ask_at_once(name, counting)
    # A background refresh starts within milliseconds of the asking: this waits for one, up to a second.
    for _ in range(100):
        if counting.computations > 1:
            break
        computed_again.wait(0.01)
    computed_again.set()
    assert counting.computations == 1
    assert all(value.equals(first) for value in values)
    assert len(loads) == 1


def test_a_changed_folder_is_read_again_and_its_former_state_dropped(experiment):
    """A commit changes the folder's state: the view is computed again from the folder read again,
    and the Results of the former state is no longer held (asked again, it is read again)."""
    name, counting, loads = experiment
    counting.all_asked.set()
    folder = state.results_root() / name
    former = state._results_stamp(folder)
    assert list(state.view("counting", name, None, "mrr")["value"]) == [1.0, 0.5, 1.0, 0.5]
    ResultStore(folder).commit_shard("r1", ["q3"], {"scores": score_rows([("r1", "q3", "mrr", 0.25)])})
    assert sorted(state.view("counting", name, None, "mrr")["value"]) == [0.25, 0.5, 0.5, 1.0, 1.0]
    assert counting.computations == 2 and len(loads) == 2
    state._results(str(folder), former)  # the former state's Results: dropped, so read again
    assert len(loads) == 3


def test_sessions_asking_for_one_chart_at_once_build_it_once_and_share_it(experiment, monkeypatch):
    name, _, _ = experiment
    from ragkit.analysis import charts

    built: list[str] = []
    real_chart = charts.metric_bar_chart

    def counting_chart(means, runs):
        built.append(threading.current_thread().name)
        return real_chart(means, runs)

    monkeypatch.setattr(charts, "metric_bar_chart", counting_chart)
    with ThreadPoolExecutor(max_workers=SESSIONS) as sessions:
        figures = list(sessions.map(lambda _: state.chart("metric_bar_chart", "means", name, None, ["mrr"],
                                                          title="mrr"), range(SESSIONS)))
    assert len(built) == 1
    assert all(figure is figures[0] for figure in figures) and figures[0].layout.title.text == "mrr"


def test_sessions_asking_for_one_text_table_at_once_format_it_once(experiment, monkeypatch):
    """A view formatted as the page shows it (``state.table``) is formatted once for every session."""
    name, _, _ = experiment
    from ragkit.analysis import report

    formatted: list[str] = []
    real_table = report.factor_table

    def counting_table(rows):
        formatted.append(threading.current_thread().name)
        return real_table(rows)

    monkeypatch.setattr(report, "factor_table", counting_table)
    with ThreadPoolExecutor(max_workers=SESSIONS) as sessions:
        tables = list(sessions.map(lambda _: state.table("factor_table", "factor_effects", name, None, ["mrr"]),
                                   range(SESSIONS)))
    assert len(formatted) == 1
    assert all(table.equals(tables[0]) for table in tables)
    assert list(tables[0]["factor"]) == ["chunker"] and list(tables[0]["level vs reference"]) == ["cr2 vs cr1"]
