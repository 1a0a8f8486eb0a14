"""Issue 38's path in headless Chromium, with no LLM: a corpus ingested from the user's files, a
question set generated from it by the extractive method on the Question sets page (a background
job running `ragkit questions generate --method extractive`), its quality report and its review
with the passage and the answer highlighted, the New experiment page starting from the set's own
corpus with its review state, and the Runs page showing what the job kept of what was asked."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.dashboard.test_browser_e2e import (  # noqa: F401 (fixtures)
    CHROMIUM,
    REPO_ROOT,
    browser_page,
    go_to,
    server,
    settle,
    shot,
)
from tests.dashboard.test_browser_question_flow import choose, fill, widget

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
]

CORPUS = "filings"
ASKED = 8
JOB_TIMEOUT_MS = 120_000
# A user's own documents: a table, a heading with its section, a definition and figures.
DOCUMENTS = {
    "q3-report.md": "# Quarterly report\n\n## Revenue\n\nRevenue grew to 4.2 million dollars in the third quarter "
                    "of 2025, after 3.1 million in the second quarter. The board met on 14 March 2025.\n\n"
                    "| Segment | 2025 | 2024 |\n|---|---|---|\n| Cloud | 2,310 | 1,870 |\n| Devices | 905 | 1,120 |\n",
    "glossary.md": "# Glossary\n\n## Terms\n\nA deferred tax asset is an amount that reduces taxes payable in "
                   "future periods. Working capital is the difference between current assets and current "
                   "liabilities.\n\n## Staff\n\nThe company employed 1,245 people at the end of 2025.\n",
    "outlook.txt": "Outlook\n\nThe company expects revenue of 17 million dollars in 2026. Capital spending "
                   "will reach 2.5 million dollars, mostly on data centres opened in April 2026.\n",
}


def test_extractive_set_from_an_ingested_corpus_reviewed_and_planned_in_chromium(browser_page, server,  # noqa: F811
                                                                                 tmp_path, isolated_data_dir):
    folder = tmp_path / "my-docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    ingested = subprocess.run([sys.executable, "-m", "ragkit.cli", "ingest", str(folder), "--corpus", CORPUS],
                              cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert ingested.returncode == 0, ingested.stdout + ingested.stderr
    page = browser_page

    # --- Generate from the ingested corpus, extractive: no LLM call ---------------------------------
    page.goto(server)
    page.get_by_role("heading", name="Corpora").first.wait_for()
    go_to(page, "Question sets")
    page.get_by_test_id("stExpander").filter(has_text="Generate a question set").locator("summary").click()
    settle(page)
    choose(page, "Corpus", CORPUS)
    widget(page, "stRadio", "Method").get_by_text(re.compile("^Extractive")).click()
    settle(page)
    fill(page, "spinbutton", "Questions", str(ASKED))
    # A rerun (the number's, or the jobs panel's timed fragment) can leave a stale copy of the panel on
    # the page for a moment (CI saw two "Generate" buttons): click the current run's, by its widget key.
    page.locator('.st-key-gen_start[data-stale="false"]').get_by_role("button", name="Generate", exact=True).click()
    page.get_by_text("Started generation job").wait_for()
    # Outcome, not activity: the panel says what was kept of what was asked.
    done = page.get_by_text(re.compile(rf": done · kept \d+ of {ASKED}")).first
    done.wait_for(timeout=JOB_TIMEOUT_MS)
    kept = int(re.search(rf"kept (\d+) of {ASKED}", done.inner_text()).group(1))
    assert kept >= 1
    generated = next((isolated_data_dir / "question_sets" / "generated").iterdir())
    registered = isolated_data_dir / "question_sets" / f"{generated.name}.json"
    for _ in range(100):
        if registered.exists():
            break
        page.wait_for_timeout(200)
    settle(page)
    assert not (generated / "corpus.jsonl").exists()  # the set names its ingested corpus instead

    # --- Its quality report and its review, the answer highlighted in its passage -------------------
    choose(page, "Preview", generated.name)
    # A job-status fragment rerunning beside the preview can leave a stale copy of the section on
    # the page for a moment, so the heading may be there twice: wait for either.
    page.get_by_role("heading", name="Quality").first.wait_for()
    assert page.get_by_text("This set ships no corpus.jsonl").count() == 0
    page.get_by_text("bm25 ranks the source first").first.wait_for()
    page.get_by_role("heading", name="Review").first.wait_for()
    mark = page.locator("mark").first
    mark.wait_for()
    assert mark.inner_text().strip()
    shot(page, tmp_path, "o01_generated_reviewed")

    # --- New experiment: the set's own corpus by default, and its review state ---------------------
    go_to(page, "New experiment")
    choose(page, "Question set", generated.name)
    corpus_box = widget(page, "stSelectbox", "Corpus")
    # The chosen value is the box's text, or its input's value (a searchable select)
    shown = corpus_box.evaluate("box => box.textContent + ' ' + [...box.querySelectorAll('input')]"
                                ".map(input => input.value).join(' ')")
    assert CORPUS in shown, shown
    page.get_by_text(re.compile(r"^Review: .*pending")).first.wait_for()
    shot(page, tmp_path, "o02_new_experiment")

    # --- Runs: the generation job's yield ---------------------------------------------------------
    go_to(page, "Runs")
    # The job's progress line and, the yield being poor (fewer than 30), a warning with what to do.
    page.get_by_test_id("stProgress").filter(has_text=re.compile(rf"^done · kept {kept} of {ASKED}")).wait_for()
    page.get_by_test_id("stAlert").filter(has_text=re.compile(rf"kept {kept} of {ASKED}.*Next: ")).wait_for()
    shot(page, tmp_path, "o03_runs")
