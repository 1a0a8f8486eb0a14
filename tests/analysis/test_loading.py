"""Results read lazy tables in the background when asked to (``prefetch``): the table a view then
gets is the one a plain read gives, every subset shares it, and a read that failed in the
background fails where the table is asked for."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.analysis import views
from ragkit.analysis.loading import Results, load_results
from ragkit.results import ResultStore
from tests.analysis.helpers import run_row, score_rows

pytestmark = pytest.mark.unit


def _folder(tmp_path):
    store = ResultStore(tmp_path)
    store.write_questions("q1", pd.DataFrame({"question_id": ["q1", "q2"], "text": ["a", "b"]}))
    for run_id in ("r1", "r2"):
        store.write_run(run_id, run_row(run_id, chunker=f"c{run_id}"))
        store.commit_shard(run_id, ["q1", "q2"], {
            "scores": score_rows([(run_id, "q1", "mrr", 1.0), (run_id, "q2", "mrr", 0.5)]),
            "stages": pd.DataFrame({"run_id": run_id, "question_id": ["q1", "q2"], "stage": "retrieve",
                                    "seconds": [0.1, 0.3], "cached": False}),
        })
    return tmp_path


def test_a_prefetched_table_is_the_table_a_plain_read_gives(tmp_path):
    plain = load_results(_folder(tmp_path))
    fetched = load_results(tmp_path)
    selection = fetched.subset(["r2"])
    views.read_metrics(selection, ("mrr",))  # a page's first read starts stages and judgements
    assert set(fetched._pending) == {"stages", "judgements"}
    pd.testing.assert_frame_equal(selection.stages, plain.subset(["r2"]).stages)
    pd.testing.assert_frame_equal(fetched.stages, plain.stages)
    assert fetched._pending.keys() == {"judgements"}  # the stages' read was used, not read again
    pd.testing.assert_frame_equal(fetched.judgements, plain.judgements)
    fetched.prefetch("stages")  # read already: nothing started
    assert not fetched._pending


def test_a_failed_background_read_fails_where_the_table_is_asked_for(tmp_path, monkeypatch):
    results = load_results(_folder(tmp_path))

    def broken(self, name, **_):
        raise OSError(f"disk gone while reading {name}")

    monkeypatch.setattr(ResultStore, "read", broken)
    results.prefetch("stages")
    with pytest.raises(OSError, match="disk gone while reading stages"):
        _ = results.stages


def test_prefetch_names_the_valid_tables():
    with pytest.raises(ValueError, match="unknown results tables \\['score'\\]; valid: stages, retrievals"):
        Results(pd.DataFrame({"run_id": ["r1"]})).prefetch("score")


def test_sessions_asking_at_once_for_a_prefetched_table_all_get_it(tmp_path):
    """The dashboard shares one Results between sessions: several threads asking for a table
    whose read is under way each get the table, none an error."""
    from concurrent.futures import ThreadPoolExecutor

    plain = load_results(_folder(tmp_path)).stages
    for _ in range(5):
        shared = load_results(tmp_path)
        shared.prefetch("stages")
        with ThreadPoolExecutor(4) as pool:
            tables = list(pool.map(lambda run_ids, results=shared: results.subset(run_ids).stages,
                                   [None, ["r1"], ["r2"], None]))
        pd.testing.assert_frame_equal(tables[0], plain)
        pd.testing.assert_frame_equal(tables[3], plain)
        assert set(tables[1]["run_id"]) == {"r1"} and set(tables[2]["run_id"]) == {"r2"}


def test_a_prefetch_still_queued_is_read_by_the_one_asking_not_waited_for(tmp_path):
    """One background reader serves every folder: a table whose read has not started (another
    folder's read is under way) is read by whoever asks for it, without waiting."""
    import threading

    from ragkit.analysis import loading

    results = load_results(_folder(tmp_path))
    release = threading.Event()
    busy = loading._PREFETCH.submit(release.wait, 30)  # another folder's long read
    try:
        results.prefetch("stages")
        queued = results._pending["stages"]
        pd.testing.assert_frame_equal(results.stages, load_results(tmp_path).stages)
        assert queued.cancelled() and not busy.done()  # read here, while the reader was still busy
    finally:
        release.set()
    assert busy.result() is True
