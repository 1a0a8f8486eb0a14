"""The dashboard lists experiments on object storage (RAGKIT_REMOTE_RESULTS) beside the local ones
and shows them as the library reads them, against moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from ragkit.analysis import load_results
from ragkit.analysis.views import runs_by_metrics
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.settings import get_settings
from tests.dashboard.test_pages import DASHBOARD, TIMEOUT, assert_ok, table_with
from tests.factories import write_beir
from tests.results import test_s3 as results_s3
from tests.results.test_s3 import BUCKET, DOCS, QUESTIONS

pytestmark = pytest.mark.integration

s3_server, s3 = results_s3.s3_server, results_s3.s3
ROOT = f"s3://{BUCKET}/experiments"


def page(name: str, **query: str) -> AppTest:
    app = AppTest.from_file(str(DASHBOARD / "views" / name), default_timeout=TIMEOUT)
    app.query_params.update(query)
    return app


@pytest.fixture
def remote_and_local(tmp_path, s3, isolated_data_dir, monkeypatch):
    """The same two-run experiment written to S3 (as 'tiny') and to the local results root."""
    config = config_from_dict({"name": "tiny", "dataset": {"path": str(write_beir(tmp_path / "beir", DOCS, QUESTIONS))},
                               "embedders": [], "chunkers": ["document"], "retrievers": ["bm25"], "top_k": [1, 3]})
    assert not run_experiment(config, f"{ROOT}/tiny").errors
    assert not run_experiment(config, get_settings().results_root() / "tiny-local").errors
    monkeypatch.setenv("RAGKIT_REMOTE_RESULTS", ROOT)
    get_settings.cache_clear()
    return f"{ROOT}/tiny"


def test_an_experiment_on_object_storage_is_listed_and_compared_as_the_library_reads_it(remote_and_local):
    app = page("5_compare.py", exp=remote_and_local, metrics="mrr").run()
    assert_ok(app)
    assert app.selectbox(key="pick_experiment").options == ["tiny-local", remote_and_local]
    assert app.selectbox(key="pick_experiment").value == remote_and_local
    answer = table_with(app, "level vs reference")
    assert answer[["factor", "metric"]].values.tolist() == [["top_k", "mrr"]]
    app = page("5_compare.py", exp=remote_and_local, metrics="mrr", section="Runs x metrics").run()
    assert_ok(app)
    shown = table_with(app, "run_id", "label", "mrr").set_index("run_id")["mrr"].sort_index()
    expected = runs_by_metrics(load_results(remote_and_local), ("mrr",)).set_index("run_id")["mrr"].sort_index()
    assert len(shown) == 2 and shown.round(12).tolist() == expected.round(12).tolist()

    drilldown = page("6_drilldown.py", exp=remote_and_local).run()
    assert_ok(drilldown)
    export = page("7_export.py", exp=remote_and_local).run()
    assert_ok(export)


def test_unreachable_object_storage_is_a_warning_and_the_local_experiments_still_show(
        remote_and_local, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    app = page("5_compare.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("cannot be listed" in w.value and ROOT in w.value for w in app.warning)
    assert app.selectbox(key="pick_experiment").options == ["tiny-local"]


def test_a_remote_results_setting_that_is_not_s3_fails_naming_it(monkeypatch, isolated_data_dir):
    from ragkit.errors import ConfigError

    monkeypatch.setenv("RAGKIT_REMOTE_RESULTS", "/some/local/folder")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match="RAGKIT_REMOTE_RESULTS"):
        get_settings()


def test_object_storage_that_fails_after_listing_stops_the_page_with_a_message_not_a_traceback(
        remote_and_local, monkeypatch):
    import streamlit as st
    from botocore.exceptions import EndpointConnectionError

    import ragkit.storage.folders

    def gone(*args, **kwargs):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setattr(ragkit.storage.folders, "folder_state", gone)
    app = page("5_compare.py", exp=remote_and_local).run()
    assert not app.exception, [e.value for e in app.exception]
    assert [e.value for e in app.error] == [
        f"Results on object storage ({remote_and_local}) cannot be read: "
        'Could not connect to the endpoint URL: "http://127.0.0.1:9"']
