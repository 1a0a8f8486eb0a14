"""The real dashboard in headless Chromium: upload, question set, 2-run grid, run, compare, export.

The server is started the way ``ragkit dashboard`` starts it (127.0.0.1, a 1 MB upload limit) on
a private RAGKIT_DATA_DIR. Screenshots of every page go to the test's tmp folder and to
/tmp/ragkit-screens/ for a human to look at.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.factories import TINY_DOCS as DOCS
from tests.factories import TINY_QUESTIONS as QUESTIONS
from tests.factories import write_beir

playwright_api = pytest.importorskip("playwright.sync_api")

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# Set RAGKIT_SCREENSHOTS to a folder to keep the screenshots for a look after the run.
SCREENS = Path(os.environ["RAGKIT_SCREENSHOTS"]) if os.environ.get("RAGKIT_SCREENSHOTS") else None
MAX_UPLOAD_MB = 1
STARTUP_TIMEOUT_S = 90
WAIT_MS = 60_000
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

TOP_K = (1, 3)
# A marker in every hostile name, so an escaped copy can be searched for by name.
ESCAPE_MARK = "ragkit-e2e-escape"
HOSTILE_NAMES = [f"../../{ESCAPE_MARK}.txt", f"..\\..\\{ESCAPE_MARK}-win.md", f"{ESCAPE_MARK}-" + "a" * 300 + ".txt"]
NUL_NAME = f"{ESCAPE_MARK}-nul\x00name.md"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
]




def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of the sockets listening on ``port``."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        lines = Path(table).read_text().splitlines()[1:] if Path(table).exists() else []
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                addresses.add(address)
    return addresses


def escaped_copies(places: list[Path], data_dir: Path) -> list[Path]:
    """Files carrying ESCAPE_MARK in their name found in ``places`` (recursively) outside data_dir."""
    found = []
    for place in places:
        for path in place.rglob(f"*{ESCAPE_MARK}*") if place.is_dir() else []:
            if data_dir.resolve() not in path.resolve().parents:
                found.append(path)
    return found


@pytest.fixture
def server(isolated_data_dir, monkeypatch) -> Iterator[str]:
    """The dashboard on a free port, bound to 127.0.0.1, with a 1 MB upload limit, started by the
    command `ragkit dashboard` runs (its server flags are what the tests exercise)."""
    from ragkit.cli.dashboard import streamlit_command
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_MAX_FILE_MB", str(MAX_UPLOAD_MB))  # the server's limit and the app's
    get_settings.cache_clear()
    port = free_port()
    command = streamlit_command(REPO_ROOT / "dashboard" / "app.py", "127.0.0.1", port)
    assert command[command.index("--server.maxUploadSize") + 1] == str(MAX_UPLOAD_MB)
    log = (isolated_data_dir.parent / f"streamlit-{port}.log").open("w")
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert process.poll() is None, Path(log.name).read_text()
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "dashboard did not answer /_stcore/health in time"
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture
def browser_page(server):
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def settle(page) -> None:
    """Wait until Streamlit has finished the current rerun (the 'Running...' widget is gone)."""
    page.wait_for_timeout(300)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=WAIT_MS)


def go_to(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=re.compile(rf"{re.escape(title)}$")).click()
    page.get_by_role("heading", level=1).filter(has_text=re.compile(title.split()[0], re.I)).first.wait_for()
    settle(page)


def shot(page, tmp_path: Path, name: str) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside stMain, so grow the viewport to fit it."""
    settle(page)
    viewport = page.viewport_size
    height = page.evaluate('Math.max(...[...document.querySelectorAll(\'[data-testid="stMain"], '
                           '[data-testid="stAppViewContainer"]\')].map(e => e.scrollHeight))')
    page.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], height)})
    page.wait_for_timeout(1000)  # charts re-layout and progress bars finish their transition
    target = tmp_path / f"{name}.png"
    page.screenshot(path=str(target), full_page=True)
    page.set_viewport_size(viewport)
    if SCREENS is not None:
        SCREENS.mkdir(parents=True, exist_ok=True)
        shutil.copy(target, SCREENS / target.name)


def select_option(page, label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def set_checkbox(page, label: str, value: bool) -> None:
    box = page.get_by_test_id("stCheckbox").filter(has=page.get_by_text(label, exact=True))
    if box.get_by_role("checkbox").is_checked() != value:
        box.locator("label").click()
        settle(page)


def expected_score_rows(top_ks: tuple[int, ...], questions: int) -> int:
    """runs x questions x metrics: each run scores its cut-offs (its own and the other runs'
    depths), the curve metrics, the token budgets and the final context's metrics."""
    from ragkit.metrics.retrieval import FinalContext, question_metrics, scored_ks

    context = FinalContext.empty()
    per_run = [len(question_metrics(context, {"d1": 1.0}, None, k, scored_ks(k, k, top_ks))) for k in top_ks]
    return questions * sum(per_run)


def test_upload_grid_run_compare_export_in_chromium(browser_page, server, tmp_path, isolated_data_dir):
    expect = playwright_api.expect
    page = browser_page
    data_dir = isolated_data_dir
    upload_requests: list[str] = []
    page.on("request", lambda r: upload_requests.append(r.url) if "/_stcore/upload_file/" in r.url else None)

    # --- the server listens on loopback only ---------------------------------------------------
    port = int(server.rsplit(":", 1)[1])
    assert listening_addresses(port) == {"0100007F"}, listening_addresses(port)  # 127.0.0.1

    # --- Corpora: two files plus hostile names, stored sanitised inside the data dir -------------
    page.goto(server)
    page.get_by_role("heading", name="Corpora").first.wait_for()
    settle(page)
    uploader = page.get_by_test_id("stFileUploaderDropzoneInput").first
    good = [
        {"name": "cats.txt", "mimeType": "text/plain", "buffer": DOCS["d1"].encode()},
        {"name": "sun.md", "mimeType": "text/markdown", "buffer": f"# Sun\n\n{DOCS['d3']}\n".encode()},
    ]
    hostile = [{"name": name, "mimeType": "text/plain", "buffer": b"hostile name " + str(i).encode()}
               for i, name in enumerate(HOSTILE_NAMES)]
    uploader.set_input_files(good + hostile)
    chips = page.get_by_test_id("stFileChip")
    chips.nth(len(good) + len(hostile) - 1).wait_for()
    page.get_by_role("button", name="Ingest").click()
    page.get_by_text(re.compile(r"\d+ of 5 files ingested")).wait_for()
    settle(page)
    shot(page, tmp_path, "01_corpora")

    stored = [p for p in (data_dir / "uploads").rglob("*") if p.is_file()]
    assert len(stored) == 5, stored
    for path in stored:
        assert "\x00" not in path.name and "/" not in path.name and not path.name.startswith(".")
        assert len(path.name.encode()) <= 255
    assert {"cats.txt", "sun.md", f"{ESCAPE_MARK}.txt"} <= {p.name for p in stored}
    searched = [data_dir.parent, REPO_ROOT, Path.cwd()]  # data_dir.parent holds this test's tmp_path too
    assert escaped_copies(searched, data_dir) == []

    # --- upload limit: the browser refuses, the server refuses a forged request -----------------
    uploader.set_input_files([{"name": "big.txt", "mimeType": "text/plain",
                               "buffer": b"x" * (int(1.5 * 1024 * 1024))}])
    page.get_by_text(re.compile(r"File must be .*MB or smaller|exceeds", re.I)).first.wait_for()
    shot(page, tmp_path, "02_upload_too_large")
    assert not list((data_dir / "uploads").rglob("big.txt"))
    assert upload_requests, "no upload request was seen"
    status = page.evaluate(
        """async ([url, size]) => {
            const token = (document.cookie.match(/_streamlit_xsrf=([^;]+)/) || [])[1] || "";
            const form = new FormData();
            form.append("file", new Blob([new Uint8Array(size)]), "forged.txt");
            const response = await fetch(url, {method: "PUT", body: form, credentials: "same-origin",
                                               headers: {"X-Xsrftoken": decodeURIComponent(token)}});
            return response.status;
        }""",
        [upload_requests[0], 2 * 1024 * 1024],
    )
    assert status == 413

    # Streamlit itself refuses a name with NUL when the script reads the uploader: nothing is stored.
    uploader.set_input_files([{"name": NUL_NAME, "mimeType": "text/plain", "buffer": b"nul"}])
    chips.filter(has_text="name.md").wait_for()
    page.get_by_role("button", name="Ingest").click()
    page.get_by_text("Filename cannot contain null bytes").wait_for()
    shot(page, tmp_path, "03_upload_nul_name")
    assert len([p for p in (data_dir / "uploads").rglob("*") if p.is_file()]) == 5
    assert escaped_copies(searched, data_dir) == []

    # --- Question sets: import the tiny BEIR set by path ---------------------------------------
    beir = write_beir(tmp_path / "beir")
    go_to(page, "Question sets")
    page.get_by_test_id("stExpander").filter(has_text="Import a question set").locator("summary").click()
    page.get_by_text("Path on this machine").click()
    settle(page)
    name_box = page.get_by_role("textbox", name="Name", exact=True)
    name_box.fill("tiny-beir")
    name_box.press("Enter")
    settle(page)
    path_box = page.get_by_role("textbox", name="Path", exact=True)
    path_box.fill(str(beir))
    path_box.press("Enter")
    settle(page)
    page.get_by_role("button", name="Import").click()
    page.get_by_text("Imported 'tiny-beir': 3 questions").wait_for()
    settle(page)
    shot(page, tmp_path, "04_question_sets")

    # --- New experiment: document chunker x bm25 x top-k 1 and 3 --------------------------------
    go_to(page, "New experiment")
    experiment = page.get_by_role("textbox", name="Experiment name", exact=True)
    experiment.fill("e2e")
    experiment.press("Enter")
    settle(page)
    select_option(page, "Question set", "tiny-beir")
    set_checkbox(page, "recursive", False)
    set_checkbox(page, "document", True)
    set_checkbox(page, "dense", False)
    set_checkbox(page, "bm25", True)
    top_k = page.get_by_test_id("stMultiSelect").filter(has_text="top-k values")
    for _ in range(2):  # drop the default values
        top_k.get_by_role("button", name=re.compile("Delete|Clear|remove", re.I)).first.click()
        settle(page)
    for k in TOP_K:
        top_k.click()
        page.get_by_role("option", name=str(k), exact=True).click()
        settle(page)
    page.get_by_test_id("stMetric").first.click()  # closes the top-k dropdown
    metric = page.get_by_test_id("stMetric").filter(has_text="Runs in the grid")
    expect(metric.get_by_test_id("stMetricValue")).to_have_text(str(len(TOP_K)), timeout=WAIT_MS)
    settle(page)
    shot(page, tmp_path, "05_new_experiment")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Started job").wait_for()
    settle(page)

    # --- Runs: wait until the job is done ------------------------------------------------------
    go_to(page, "Runs")
    page.get_by_text(re.compile(r"^done · ")).wait_for(timeout=120_000)
    shot(page, tmp_path, "06_runs")

    # --- Compare: the factor table, then its chart --------------------------------------------------
    go_to(page, "Compare")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    page.get_by_text("Chart: each level against its reference").click()
    page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').first.wait_for()
    page.locator(".js-plotly-plot .main-svg").first.wait_for()
    settle(page)
    shot(page, tmp_path, "07_compare")

    # --- Question drill-down: renders for the finished experiment -------------------------------
    go_to(page, "Question drill-down")
    page.get_by_test_id("stSelectbox").filter(has_text="Experiment").first.wait_for()
    shot(page, tmp_path, "08_drilldown")
    assert page.get_by_test_id("stException").count() == 0

    # --- Export: the CSV zip has one score row per run x question x metric ----------------------
    go_to(page, "Export")
    button = page.get_by_test_id("stDownloadButton").get_by_role("button", name=re.compile(r"Download e2e\.zip"))
    button.wait_for()
    shot(page, tmp_path, "09_export")
    with page.expect_download() as download_info:
        button.click()
    archive = zipfile.ZipFile(io.BytesIO(Path(download_info.value.path()).read_bytes()))
    scores = pd.read_csv(archive.open("scores.csv"))
    assert scores["run_id"].nunique() == len(TOP_K)
    assert set(scores["question_id"]) == set(QUESTIONS)
    assert not scores.duplicated(["run_id", "question_id", "metric"]).any()
    # (7 metrics at k=1 + 15 at k=3: the @1..@3 cut-offs, curve points and mrr) x 3 questions
    # per question: k=1 scores 8 cut metrics, k=3 15 plus 2 curve points; each 4 budgets and 4
    # final-context metrics: (16 + 25) x 3 questions
    assert len(scores) == expected_score_rows(TOP_K, len(QUESTIONS)) == 123
