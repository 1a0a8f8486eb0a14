"""Issue 27 end to end in headless Chromium: generate a question set from the bundled sample on
the Question sets page (a background job running `ragkit questions generate`), review it (accept
one, edit one, reject one), freeze it, run a bm25 experiment on the frozen set, label five pooled
chunks on the Label page, and see the judges-against-people table on the Compare page.

The LLM is scripted: a local Ollama-speaking server (tests/llms/fake_ollama.py) that the
dashboard's children find as the default backend through RAGKIT_OLLAMA_URL. The page's
Generate button runs the real CLI against it. The relevance judge has no button: its grades come
from `ragkit labels judge` on the command line, the cheapest way to judge values beside the labels.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dashboard.test_browser_e2e import (  # noqa: F401 (fixtures)
    CHROMIUM,
    REPO_ROOT,
    browser_page,
    go_to,
    playwright_api,
    select_option,
    server,
    set_checkbox,
    settle,
    shot,
)
from tests.questions.generation_helpers import scripted_ollama_server

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
]

PLANNED = 4
LABELLED = 5
JOB_TIMEOUT_MS = 120_000


@pytest.fixture(autouse=True)
def scripted_ollama(monkeypatch):
    """Set before the server fixture starts the dashboard, whose environment its children inherit."""
    with scripted_ollama_server(monkeypatch) as fake:
        yield fake


def widget(page, test_id: str, label: str):
    return page.get_by_test_id(test_id).filter(has=page.get_by_text(label, exact=True)).first


def choose(page, label: str, option: re.Pattern | str, attempts: int = 3) -> None:
    """Pick an option; a rerun that lands while the list is open closes it, so open it again."""
    for attempt in range(attempts):
        widget(page, "stSelectbox", label).click()
        wanted = page.get_by_role("option", name=option).first
        try:
            wanted.wait_for(timeout=10_000)
            wanted.click()
            break
        except playwright_api.TimeoutError:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")
            settle(page)
    settle(page)


def fill(page, role: str, name: str, value: str) -> None:
    box = page.get_by_role(role, name=name, exact=True)
    box.fill(value)
    box.press("Enter")
    settle(page)


def review_caption(page, accepted: int, edited: int, rejected: int, pending: int) -> None:
    page.get_by_text(f"accepted {accepted}, edited {edited}, rejected {rejected}, pending {pending}",
                     exact=True).wait_for()


def test_generate_review_freeze_run_label_agree_in_chromium(browser_page, server, tmp_path,  # noqa: F811
                                                            isolated_data_dir, scripted_ollama):
    page = browser_page

    # --- Generate: a background job on the bundled sample, factoid questions only ----------------
    page.goto(server)
    page.get_by_role("heading", name="Corpora").first.wait_for()
    go_to(page, "Question sets")
    page.get_by_test_id("stExpander").filter(has_text="Generate a question set").locator("summary").click()
    settle(page)
    fill(page, "spinbutton", "Questions", str(PLANNED))
    types = widget(page, "stMultiSelect", "Types")
    types.click()
    for _ in range(3):  # Backspace drops the last chosen type: unanswerable, multi_hop, paraphrase
        page.keyboard.press("Backspace")
    page.keyboard.press("Escape")
    settle(page)
    set_checkbox(page, "Also find near-duplicates by embedding (MiniLM)", False)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.get_by_text("Started generation job").wait_for()
    # The outcome beside the state: what the job kept of the questions asked, then its calls.
    page.get_by_text(re.compile(rf": done · kept \d+ of {PLANNED}.* · {PLANNED}/{PLANNED}$")).first.wait_for(
        timeout=JOB_TIMEOUT_MS)
    generated = next((isolated_data_dir / "question_sets" / "generated").iterdir())
    # The page registers the finished set, then reruns: wait for both before choosing it.
    registered = isolated_data_dir / "question_sets" / f"{generated.name}.json"
    for _ in range(100):
        if registered.exists():
            break
        page.wait_for_timeout(200)
    settle(page)
    rows = [json.loads(line) for line in (generated / "questions.jsonl").read_text().splitlines()]
    assert [row["type"] for row in rows] == ["factoid"] * PLANNED
    assert scripted_ollama.chats == PLANNED  # one call per planned question, by the job's child
    shot(page, tmp_path, "q01_generated")

    # --- Review: the generated set is in the list; accept one, edit one, reject one, freeze --------
    choose(page, "Preview", generated.name)
    page.get_by_role("heading", name="Review").first.wait_for()
    review_caption(page, 0, 0, 0, PLANNED)
    page.get_by_role("button", name="Accept", exact=True).click()
    review_caption(page, 1, 0, 0, PLANNED - 1)
    choose(page, "Question", re.compile(rf"^{re.escape(rows[1]['id'])} "))
    settle(page)
    page.get_by_test_id("stExpander").filter(has=page.get_by_text("Edit", exact=True)).locator("summary").click()
    # Type only once the rerun that picked the question has drawn its edit box: under load the box
    # of the question chosen before (its own key) can still be on the page for a moment.
    box = page.get_by_role("textbox", name="Question text", exact=True)
    for _ in range(100):
        if box.input_value() == rows[1]["question"]:
            break
        page.wait_for_timeout(200)
    assert box.input_value() == rows[1]["question"]
    fill(page, "textbox", "Question text", "Where was the sample of this edited question kept?")
    page.get_by_role("button", name="Save edit", exact=True).click()
    review_caption(page, 1, 1, 0, PLANNED - 2)
    choose(page, "Question", re.compile(rf"^{re.escape(rows[2]['id'])} "))
    page.get_by_role("button", name="Reject", exact=True).click()
    review_caption(page, 1, 1, 1, PLANNED - 3)
    set_checkbox(page, "Leave out questions not reviewed yet", True)
    page.get_by_role("button", name="Freeze", exact=True).click()
    frozen_text = page.get_by_text(re.compile(r"^Frozen as '.+': 2 questions"))
    frozen_text.wait_for()
    frozen_name = re.match(r"Frozen as '(.+)':", frozen_text.inner_text()).group(1)
    shot(page, tmp_path, "q02_reviewed_frozen")
    frozen = [json.loads(line) for line in
              (isolated_data_dir / "question_sets" / "frozen" / frozen_name / "questions.jsonl").read_text()
              .splitlines()]
    assert [row["id"] for row in frozen] == [rows[0]["id"], rows[1]["id"]]
    assert frozen[1]["question"] == "Where was the sample of this edited question kept?"

    # --- New experiment on the frozen set: recursive chunks x bm25, top-k 5 and 10 -----------------
    go_to(page, "New experiment")
    fill(page, "textbox", "Experiment name", "qflow")
    select_option(page, "Question set", frozen_name)
    set_checkbox(page, "dense", False)
    set_checkbox(page, "bm25", True)
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Started job").wait_for()
    settle(page)
    go_to(page, "Runs")
    page.get_by_text(re.compile(r"^done · \d+/\d+ questions")).wait_for(timeout=JOB_TIMEOUT_MS)
    shot(page, tmp_path, "q03_runs")

    # --- Label: pool the runs' top-5, grade the first question's five chunks -------------------------
    go_to(page, "Label")
    fill(page, "spinbutton", "Top-k chunks of each run", str(LABELLED))
    page.get_by_role("button", name="Pool", exact=True).click()
    page.get_by_text(re.compile(r"^Pool .+: 2 questions, \d+ chunks")).wait_for()
    settle(page)
    fill(page, "textbox", "Your name", "ana")
    grades = ["relevant", "partly", "not", "relevant", "not"]
    for number, grade in enumerate(grades, start=1):
        widget(page, "stRadio", f"Chunk {number} is").get_by_text(grade, exact=True).click()
        settle(page)
    assert widget(page, "stRadio", f"Chunk {LABELLED + 1} is").count() == 0  # the pool holds five
    page.get_by_role("button", name="Save labels", exact=True).click()
    page.get_by_text(f"{LABELLED} label(s) saved.").wait_for()
    shot(page, tmp_path, "q04_labelled")

    # --- The judge's grades for the same pool, from the command line -----------------------------------
    results = Path(os.environ["RAGKIT_DATA_DIR"]) / "results" / "qflow"
    judged = subprocess.run([sys.executable, "-m", "ragkit.cli", "labels", "judge", str(results)], cwd=REPO_ROOT,
                            env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert judged.returncode == 0, judged.stdout + judged.stderr

    # --- Compare: judges against people -------------------------------------------------------------
    go_to(page, "Compare")
    page.get_by_role("tab", name="Judges vs people").click()  # each section is sent when its tab is opened
    page.get_by_role("heading", name="Judges against people").wait_for()
    heading = page.get_by_test_id("stHeading").filter(has_text="Judges against people")
    table = heading.locator("xpath=following::*[@data-testid='stDataFrame'][1]")
    table.wait_for()
    # The grid draws on a canvas and keeps a hidden accessible copy of its cells: the relevance
    # judge's row, on the five chunks labelled by both (from one source document).
    for cell in ("relevance judge (chunk grade 0-2)", f"{LABELLED} / 1"):
        table.get_by_role("gridcell", name=cell, exact=True, include_hidden=True).wait_for(state="attached")
    page.get_by_text("Confusion: relevance judge (chunk grade 0-2)").wait_for()
    assert page.get_by_text("No item has both a person's label").count() == 0
    assert page.get_by_test_id("stException").count() == 0
    shot(page, tmp_path, "q05_agreement")
