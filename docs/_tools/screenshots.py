"""Screenshots of the real dashboard on the bundled data, for the README and the guide.

    python docs/_tools/screenshots.py [--data-dir DIR] [--out docs/images]

Runs the quickstart (experiments/quickstart.yaml on datasets/covidqa_sample; a no-op once it is
finished in DIR), starts the dashboard as `ragkit dashboard` does (127.0.0.1, a free port), drives
it in headless Chromium with Playwright (Debian's /usr/bin/chromium, the browser the tests use)
and writes one PNG per view, reduced to a 256-colour palette so the committed files stay small.
Run it again after a UI change; nothing in it is edited by hand.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1400, "height": 900}
WAIT_MS = 120_000
CHARTS = '[data-testid="stPlotlyChart"] .main-svg'

# (file name, page path with its query, what must be drawn before the picture is taken: the picture
# is scrolled to show it at the top)
VIEWS = [
    ("compare-factors.png", "compare?exp=quickstart&section=Factors", '[data-testid="stTabs"]'),
    ("compare-best.png", "compare?exp=quickstart&section=Best+configuration", '[data-testid="stTabs"]'),
    ("drilldown.png", "drilldown?exp=quickstart", '[data-testid="stMain"] [data-testid="stMarkdownContainer"] strong'),
    ("question-review.png", "question_sets", '[data-testid="stHeading"]:has-text("Review")'),
]
# The question set the review picture shows: generated from the bundled sample without an LLM.
REVIEW_SET = "covidqa_sample extractive"
# Drawn last on each view: the picture waits for it too.
LAST = {"compare-factors.png": f".st-key-factor_chart {CHARTS}", "compare-best.png": '[data-testid="stText"]',
        "question-review.png": "mark"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the dashboard stopped before it answered")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the dashboard did not answer /_stcore/health in time")


def _settle(page) -> None:
    page.wait_for_timeout(500)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=WAIT_MS)


def _compress(path: Path) -> None:
    """A 256-colour palette PNG: a dashboard picture is flat colours and text, so it looks the same."""
    from PIL import Image

    with Image.open(path) as image:
        reduced = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    reduced.save(path, optimize=True)


def take(data_dir: Path, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from ragkit.cli.dashboard import streamlit_command

    environment = dict(os.environ, RAGKIT_DATA_DIR=str(data_dir))
    def ragkit(*arguments: str) -> None:
        subprocess.run([sys.executable, "-m", "ragkit.cli", *arguments], cwd=ROOT, env=environment, check=True)

    ragkit("run", str(ROOT / "experiments" / "quickstart.yaml"))
    generated = data_dir / "question_sets" / "generated" / "covidqa_sample-extractive"
    if not (generated / "questions.jsonl").exists():  # kept from an earlier run of this script
        ragkit("questions", "generate", str(ROOT / "datasets" / "covidqa_sample"), "--method", "extractive", "--n",
               "40", "--out", str(generated))
    register = ("import sys; from pathlib import Path; from ragkit.questions.catalogue import register_question_set; "
                "register_question_set(sys.argv[1], Path(sys.argv[2]), 'squad')")
    subprocess.run([sys.executable, "-c", register, REVIEW_SET, str(generated)], cwd=ROOT, env=environment, check=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    # The server flags `ragkit dashboard` uses, so the pictures show what users get.
    server = subprocess.Popen(streamlit_command(ROOT / "dashboard" / "app.py", "127.0.0.1", port), cwd=ROOT,
                              env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    written = []
    try:
        _wait_healthy(url, server)
        out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(WAIT_MS)
            for name, path, ready in VIEWS:
                page.goto(f"{url}/{path}")
                if name == "question-review.png":  # pick the generated set in the page's picker
                    page.locator(".st-key-preview_set").click()
                    page.get_by_role("option", name=REVIEW_SET).click()
                page.locator(LAST.get(name, ready)).first.wait_for()
                _settle(page)
                page.locator(ready).first.evaluate("element => element.scrollIntoView({block: 'start'})")
                page.wait_for_timeout(300)
                target = out / name
                page.screenshot(path=str(target))
                _compress(target)
                written.append(target)
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: "
                      f"{target.stat().st_size // 1024} KB")
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data-dir", type=Path, help="a data directory to use (default: a new temporary one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    if args.data_dir:
        take(args.data_dir, args.out)
    else:
        with tempfile.TemporaryDirectory(prefix="ragkit-screens-") as folder:
            take(Path(folder), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
