"""The Compare page sends the factor table first, its chart only when asked for, and every other
section only when its tab is asked for (issues 29 and 41: a browser's drawing was most of a
session's time under load).

AppTest cannot click a tab; a link with ``section=<tab>`` is what a click sets (the tabs are bound
to that query parameter), and tests/dashboard/test_browser_compare.py clicks in Chromium.
"""

from __future__ import annotations

import pytest

from dashboard.compare_sections import SECTIONS
from tests.dashboard import test_pages
from tests.dashboard.test_pages import assert_ok, page, table_with

pytestmark = pytest.mark.integration

judge_pair_results = test_pages.judge_pair_results

# What each tab draws for the judge_pair fixture: the keys of its charts and a column naming each
# of its tables.
DRAWN = {
    "Factors": ([], ["level vs reference"]),
    "Means": (["metric_chart"], []),
    "Answer quality": (["quality_chart"], ["scored", "reason"]),
    "Curves and latency": (["curve_chart", "latency_chart", "pareto_chart"], []),
    "Best configuration": ([], []),
    "Why questions fail": (["failure_class_chart"], []),
    "Judges on/off": (["judge_chart"], ["judge pair"]),
    "Single-factor pairs": ([], ["a -> b"]),
    "Runs x metrics": ([], ["label"]),
    "LLM usage": ([], ["llm_calls", "stage"]),
    "Judges vs people": ([], []),
}
# The DRAWN columns, the most telling first: the evaluation's table has llm_calls too.
TELLING_COLUMNS = ["level vs reference", "scored", "reason", "judge pair", "a -> b", "stage", "llm_calls", "label"]
# The views only hidden sections read: none of them may be computed for the first screen.
HIDDEN_VIEWS = {"means", "latency_means", "scored_and_failed", "failure_reasons", "curve_points", "stage_latency",
                "quality_latency", "best", "failure_class_counts", "judge_effects", "pair_effects", "runs_by_metrics",
                "llm_usage", "judge_replies", "evaluation_cost"}


def drawn(app) -> tuple[list[str], list[str]]:
    """(chart keys, the DRAWN column each table has) of a rendered page."""
    charts = [chart.proto.id.rsplit("-", 1)[-1] for chart in app.get("plotly_chart")]
    tables = [next((column for column in TELLING_COLUMNS if column in frame.value.columns), "?")
              for frame in app.dataframe]
    return charts, tables


def test_the_first_screen_is_the_factor_table_and_every_tab_is_one_click_away(judge_pair_results):
    app = page("5_compare.py").run()
    assert_ok(app)
    assert [tab.label for tab in app.tabs] == list(SECTIONS)
    assert drawn(app) == DRAWN["Factors"]
    assert not app.text  # the recommendation's text is a hidden tab's


def test_the_pickers_are_folded_and_the_link_selects_while_they_are(judge_pair_results):
    """No chip per run and metric on a first screen: the runs, metrics and curve pickers are in a
    folded expander, and the link's selection is the page's, as the opened pickers show it."""
    app = page("5_compare.py", runs="off,off-k3", metrics="faithfulness", curve="recall").run()
    assert_ok(app)
    assert not app.multiselect and [box.label for box in app.selectbox] == ["Experiment"]
    assert app.caption[0].value == "2 of 3 runs · metrics: faithfulness · curve over k: recall"
    # the factor table compares the linked runs (top_k 3 against 1; the judge's run is not chosen) on faithfulness
    answer = table_with(app, "level vs reference")
    assert answer[["factor", "level vs reference", "metric"]].values.tolist() == [["top_k", "3 vs 1", "faithfulness"]]
    assert app.query_params["runs"] in ("off,off-k3", ["off,off-k3"])  # the link is kept

    opened = page("5_compare.py", runs="off,off-k3", metrics="faithfulness", curve="recall", pickers="true").run()
    assert_ok(opened)
    assert [box.key for box in opened.multiselect] == ["pick_runs.judge_pair.None", "metrics.judge_pair"]
    assert opened.multiselect[0].value == ["off", "off-k3"] and opened.multiselect[1].value == ["faithfulness"]
    assert opened.selectbox(key="curve.judge_pair").value == "recall"
    # a choice in the opened pickers goes to the link, which a folded page then reads
    opened.multiselect(key="metrics.judge_pair").set_value(["recall@1"]).run()
    assert_ok(opened)
    assert opened.query_params["metrics"] in ("recall@1", ["recall@1"])
    folded = page("5_compare.py", metrics="recall@1").run()
    assert folded.caption[0].value == "3 of 3 runs · metrics: recall@1 · curve over k: recall"


def test_the_factor_chart_is_drawn_when_asked_for_and_its_link_keeps_it(judge_pair_results):
    app = page("5_compare.py").run()
    app.toggle(key="chart").set_value(True).run()
    assert_ok(app)
    assert drawn(app) == (["factor_chart"], ["level vs reference"])
    linked = page("5_compare.py", chart="true").run()
    assert_ok(linked)
    assert drawn(linked) == (["factor_chart"], ["level vs reference"])


@pytest.mark.parametrize("section", list(SECTIONS))
def test_a_link_to_a_tab_draws_that_tab_alone(judge_pair_results, section):
    app = page("5_compare.py", section=section).run()
    assert_ok(app)
    assert drawn(app) == DRAWN[section]
    # the link stays one to this tab (the first, the default, keeps the link short by leaving it out)
    assert app.query_params.get("section") in ((section, [section]) if section != "Factors" else (None,))
    if section == "Best configuration":
        assert "ranked on" in app.text[0].value


def test_hidden_tabs_compute_nothing(judge_pair_results, monkeypatch):
    import streamlit as st

    from ragkit.analysis import views

    computed: list[str] = []

    def counted(name, view):
        def run(*args):
            computed.append(name)
            return view(*args)
        return run

    for name, view in list(views.VIEWS.items()):
        monkeypatch.setitem(views.VIEWS, name, counted(name, view))
    st.cache_data.clear()  # views cached by an earlier test would not be computed again
    st.cache_resource.clear()
    assert_ok(page("5_compare.py").run())
    assert "factor_effects" in computed and not HIDDEN_VIEWS & set(computed), computed
    assert_ok(page("5_compare.py", section="Curves and latency").run())
    assert {"curve_points", "stage_latency", "quality_latency"} <= set(computed)
