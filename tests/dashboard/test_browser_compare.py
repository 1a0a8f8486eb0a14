"""The Compare page in headless Chromium: the factor table comes first (the pickers folded) and
its chart once asked for, another section reaches the browser only once its tab is clicked, and
the link then opens that tab."""

from __future__ import annotations

import pytest

from tests.dashboard import test_browser_e2e as e2e
from tests.dashboard import test_pages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not e2e.CHROMIUM.exists(), reason=f"no Chromium at {e2e.CHROMIUM}"),
]

server, browser_page, with_results = e2e.server, e2e.browser_page, test_pages.with_results
CHARTS = '[data-testid="stPlotlyChart"]'


def test_a_tab_is_sent_only_when_clicked_and_its_link_opens_it(with_results, server, browser_page):
    page = browser_page
    page.goto(f"{server}/compare?exp=tiny")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()  # the factor table
    e2e.settle(page)
    assert page.locator(CHARTS).count() == 0  # no chart until one is asked for
    assert page.get_by_test_id("stMultiSelect").count() == 0  # nor a chip per run: the pickers are folded
    page.get_by_text("Runs, metrics and the curve over k").click()
    page.get_by_test_id("stMultiSelect").nth(1).wait_for()
    e2e.settle(page)
    assert page.get_by_test_id("stMultiSelect").count() == 2  # runs and metrics
    assert "pickers=true" in page.url
    page.get_by_text("Chart: each level against its reference").click()
    page.locator(f".st-key-factor_chart {CHARTS} .main-svg").first.wait_for()
    e2e.settle(page)
    assert page.locator(CHARTS).count() == 1  # the factor chart alone
    assert "chart=true" in page.url
    assert page.locator(".st-key-pareto_chart").count() == 0

    page.get_by_role("tab", name="Curves and latency").click()
    page.locator(f".st-key-pareto_chart {CHARTS} .main-svg").first.wait_for()
    e2e.settle(page)
    assert page.locator(CHARTS).count() == 3  # curve, latency, Pareto; the factor chart's tab is closed
    assert "section=Curves+and+latency" in page.url or "section=Curves%20and%20latency" in page.url

    page.goto(page.url)  # the link, in a new session
    page.locator(f".st-key-pareto_chart {CHARTS} .main-svg").first.wait_for()
    e2e.settle(page)
    assert page.locator(".st-key-factor_chart").count() == 0
    assert page.get_by_test_id("stException").count() == 0
