"""The dashboard under load: the Compare page in concurrent Chromium sessions while a job runs.

    python benchmarks/bench_dashboard_load.py [--sessions 10] [--keep DIR] [--profile]
    python benchmarks/bench_dashboard_load.py --experiments quickstart --sessions 1   # one session

In one data directory (``--keep DIR`` keeps it, and what it holds is reused): the quickstart's
results (``ragkit run experiments/quickstart.yaml``, 2-3 minutes the first time) and a synthetic
folder of ``--runs`` x ``--questions`` (50 x 1,000) written by ragkit's own ResultStore through
bench_compare.build (seed 0). Starts ``ragkit dashboard`` on 127.0.0.1 and a free port, and the
dashboard's JobManager running small bm25 experiments one after another for the whole
measurement (the background job), and beside it the bare Streamlit page (bare_streamlit_page.py:
a title and a small table, nothing of ragkit) served by the same Streamlit command: the baseline
of every row, the floor that Streamlit and Chromium set on this machine for both goals. Then per
experiment, each session a fresh Chromium context opening ``/compare?exp=NAME``, whose first tab
draws the factor table, and its chart only when asked for (the page's other sections are tabs
drawn only when opened); the same link with ``chart=true`` draws the chart with the table, the
first screen before issue 41, measured beside it as the baseline of "draw less first":

- cold: one session, the first to ask (the server computes the first tab's views); for the first
  experiment also the bare server's first session;
- single: one session alone, views cached, ``--singles`` times: its median; each then asks for the
  chart (timed from the click); interleaved with as many sessions whose link has ``chart=true``
  and as many of the bare page;
- concurrent: ``--sessions`` sessions opened at once, then as many with ``chart=true``, then as
  many of the bare page.

Per session: seconds from navigation to the factor table (the bare page's table) drawn, to the
first chart drawn (a plotly SVG) where the link asks for it, when the server's message carrying
the chart arrived on the websocket (the rest, up to drawn, is the browser's rendering), when the
first screen's last message arrived, the renderer's task time up to the first screen, and errors
(a Streamlit exception or error box, a script error in the page). The load average is printed at
the start and the end. Goals (issues 29 and 41): every session without error; p95 to the factor
table <= 3x the single session's; the single session's first screen < 2 s (the quickstart and
the 1,000 x 1,000 folder: ``--runs 1000 --questions 1000``, built once on every core, about 21
minutes of CPU); each beside the bare page's same figure.
``--profile``: a child renders the Compare page with AppTest (the server's script run without a
browser) twice, the second with caches warm as a later session finds them, under cProfile
(pyinstrument is not installed here), and prints where that run's time goes, beside the bare
page's script run.
A script, not a test: it needs Debian's chromium and minutes of both cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import REPO_ROOT, Measurement, print_table

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SYNTHETIC = "bench"
BARE_PAGE = Path(__file__).resolve().parent / "bare_streamlit_page.py"
STARTUP_TIMEOUT_S = 120
SESSION_TIMEOUT_MS = 300_000
CPU_SETTLE_S = 0.5  # after a session's context closed, before its processes' CPU is read
FIRST_CHART = '[data-testid="stPlotlyChart"] .main-svg'
FACTOR_TABLE = '[data-testid="stDataFrame"]'  # the page's first table: none is above the tabs
CHART_TOGGLE = "Chart: each level against its reference"
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RUNNING = '[data-testid="stStatusWidget"]'
FIRST_CHART_GOAL_S, RATIO_GOAL = 2.0, 3.0
# The background job: the bundled sample, one chunker, bm25 (no model), run again and again.
BACKGROUND_CONFIG = {
    "name": "background", "dataset": {"path": str(REPO_ROOT / "datasets" / "covidqa_sample"), "format": "squad"},
    "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}}], "embedders": [],
    "retrievers": [{"type": "bm25"}], "top_k": [5],
}


def prepare(data_dir: Path, runs: int, questions: int, experiments: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": str(data_dir)}
    if "quickstart" in experiments and not (data_dir / "results" / "quickstart" / "runs").exists():
        print("running the quickstart (2-3 minutes on 2 cores) ...", flush=True)
        subprocess.run([sys.executable, "-m", "ragkit.cli", "run", str(REPO_ROOT / "experiments" / "quickstart.yaml"),
                        "--quiet"], env=env, check=True, cwd=REPO_ROOT)
    folder = data_dir / "results" / SYNTHETIC
    if SYNTHETIC in experiments and not (folder / "runs").exists():
        from bench_compare import build

        started = time.perf_counter()
        build(folder, runs, questions, seed=0, workers=os.cpu_count() or 1)
        print(f"built {runs} runs x {questions} questions in {time.perf_counter() - started:.1f} s", flush=True)
    elif SYNTHETIC in experiments:  # a kept folder is measured as it is, whatever --runs and --questions say
        print(f"reusing {folder}: {len(list((folder / 'runs').glob('*.parquet')))} runs", flush=True)


@dataclass(frozen=True)
class Server:
    url: str
    pid: int  # the root of the server's processes, whose CPU time is counted


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int, name_prefix: str = "") -> float:
    """CPU seconds (user and system) of ``root`` and its descendants whose name starts with
    ``name_prefix``, with their finished and reaped children's (a closed context's renderer is
    counted in its parent's once it has exited). Read from /proc (psutil is not installed)."""
    found: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # exited meanwhile
                continue
            fields = text[text.rindex(")") + 2:].split()  # fields[0] is the stat file's 3rd field (state)
            user, system, children_user, children_system = (int(value) for value in fields[11:15])
            found[int(entry)] = (int(fields[1]), text[text.index("(") + 1:text.rindex(")")],
                                 (user + system + children_user + children_system) / TICKS_PER_S)
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in found.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        if pid in found and found[pid][1].startswith(name_prefix):
            total += found[pid][2]
    return total


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def dashboard(data_dir: Path, app: Path | None = None):
    """``ragkit dashboard`` on 127.0.0.1 and a free port (or ``app`` served by the same Streamlit
    command, ``ragkit.cli.dashboard.streamlit_command``); its URL and process while it answers."""
    from ragkit.cli.dashboard import streamlit_command

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": str(data_dir)}
    log_path = data_dir / ("dashboard.log" if app is None else f"{app.stem}.log")
    log = log_path.open("w")
    command = ([sys.executable, "-m", "ragkit.cli", "dashboard", "--port", str(port)] if app is None
               else streamlit_command(app, "127.0.0.1", port))
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command[3]} exited: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the dashboard did not answer /_stcore/health in time") from None
                time.sleep(0.5)
        yield Server(url, process.pid)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


@contextmanager
def background_jobs(data_dir: Path):
    """Small experiments through the dashboard's JobManager, one after another, until the block ends."""
    from ragkit.app.jobs import ACTIVE_STATES, JobManager

    manager, stop, started = JobManager(data_dir / "jobs"), threading.Event(), []

    def keep_one_running() -> None:
        while not stop.is_set():
            job = manager.start(BACKGROUND_CONFIG, out_dir=data_dir / "background" / f"run{len(started)}")
            started.append(job.job_id)
            while not stop.wait(0.5) and manager.get(job.job_id).state in ACTIVE_STATES:
                pass
            if stop.is_set():
                manager.cancel(job.job_id)

    thread = threading.Thread(target=keep_one_running, daemon=True)
    thread.start()
    try:
        yield started
    finally:
        stop.set()
        thread.join(timeout=30)


async def one_session(browser, url: str, barrier: asyncio.Barrier | None = None, on_demand: bool = False,
                      server_pid: int | None = None) -> dict:
    """One session's timings. A link with ``chart=true`` draws the factor chart with the table (what
    the page drew first before issue 41); without it the table comes alone, and ``on_demand`` then
    asks for the chart and times it from the click. With ``server_pid`` (a session alone), also the
    CPU seconds the server's and the browser's processes spent from the start to the first screen."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(SESSION_TIMEOUT_MS)
    arrived: dict[str, float] = {}
    frames: list[float] = []  # arrival of every websocket message: the last one before the screen is done
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))

    def on_frame(payload) -> None:
        frames.append(time.perf_counter())
        data = payload if isinstance(payload, bytes) else payload.encode()
        # The factor chart's message names its key; a dataframe's does not, so only the chart is timed.
        if b"factor_chart" in data and "factor_chart" not in arrived:
            arrived["factor_chart"] = time.perf_counter()

    page.on("websocket", lambda socket: socket.on("framereceived", on_frame))
    # The renderer's own CPU (script, layout, style): what drawing the page costs, whatever the load.
    devtools = await context.new_cdp_session(page)
    await devtools.send("Performance.enable")
    if barrier is not None:
        await barrier.wait()
    cpu_before = (cpu_seconds(server_pid), cpu_seconds(os.getpid(), "chrom")) if server_pid else None
    started = time.perf_counter()
    try:
        await page.goto(url, wait_until="commit")
        timings: dict[str, float] = {}
        if "chart=true" in url:
            await page.locator(FIRST_CHART).first.wait_for(state="visible")
            timings["first_chart"] = time.perf_counter() - started
        await page.locator(FACTOR_TABLE).first.wait_for(state="visible")
        timings["factor_table"] = time.perf_counter() - started
        await page.wait_for_timeout(300)
        await page.locator(RUNNING).wait_for(state="hidden")
        done = time.perf_counter()
        errors = [await element.inner_text() for element in await page.locator(ERRORS).all()] + script_errors
        renderer = {m["name"]: m["value"] for m in (await devtools.send("Performance.getMetrics"))["metrics"]}
        if cpu_before is not None:
            timings["server_process_cpu"] = cpu_seconds(server_pid) - cpu_before[0]
            timings["browser_process_cpu"] = cpu_seconds(os.getpid(), "chrom") - cpu_before[1]
        if on_demand:  # after the first screen's renderer time was read: the chart is not part of it
            clicked = time.perf_counter()
            await page.get_by_text(CHART_TOGGLE).click()
            await page.locator(FIRST_CHART).first.wait_for(state="visible")
            timings["chart_on_demand"] = time.perf_counter() - clicked
    except Exception as error:  # noqa: BLE001  a timeout or a dead page is this session's error, not the run's
        return {"error": [f"{type(error).__name__}: {str(error)[:300]}"]}
    finally:
        await context.close()
    # The server's last message of the first screen (its script run done and sent): the rest is the browser's.
    server_done = max((t for t in frames if t <= done), default=float("nan"))
    return {**timings, "error": errors, "last_message": server_done - started,
            "renderer_cpu": renderer.get("TaskDuration", float("nan")),
            "script_cpu": renderer.get("ScriptDuration", float("nan")),
            **{f"{key}_arrived": arrived[key] - started for key in arrived}}


async def measure_experiment(page: Server, bare: Server, name: str, sessions: int, singles: int,
                             bare_cold: bool) -> dict[str, list[dict]]:
    """Every phase of one experiment's page, each beside the bare Streamlit page's in the same
    browser: single sessions interleaved, then ``sessions`` at once of each. Each session also
    gets the CPU seconds its server and the browser spent on it: alone, up to its first screen; at
    once, the phase's over its sessions (from the first start to the last context closed)."""
    from playwright.async_api import async_playwright

    url = f"{page.url}/compare?exp={name}"

    async def counted(server: Server, runs) -> list[dict]:
        before = cpu_seconds(server.pid), cpu_seconds(os.getpid(), "chrom")
        found = list(await runs)
        await asyncio.sleep(CPU_SETTLE_S)  # the closed contexts' renderers exit and are counted
        server_cpu, browser_cpu = cpu_seconds(server.pid) - before[0], cpu_seconds(os.getpid(), "chrom") - before[1]
        return [{**one, "server_process_cpu": server_cpu / len(found), "browser_process_cpu": browser_cpu / len(found)}
                for one in found]

    async def one(server: Server, link: str, **options) -> dict:
        return await one_session(browser, link, server_pid=server.pid, **options)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            measured: dict[str, list[dict]] = {"cold": [await one(page, url)]}
            if bare_cold:  # the bare server's first session: the floor of a cold server
                measured["bare_cold"] = [await one(bare, bare.url)]
            for phase in ("single", "single_chart", "bare_single"):
                measured[phase] = []
            for _ in range(singles):  # interleaved, so the three first screens see the same load
                measured["single"].append(await one(page, url, on_demand=True))
                measured["single_chart"].append(await one(page, f"{url}&chart=true"))
                measured["bare_single"].append(await one(bare, bare.url))
            for phase, server, link in (("concurrent", page, url), ("concurrent_chart", page, f"{url}&chart=true"),
                                        ("bare_concurrent", bare, bare.url)):
                barrier = asyncio.Barrier(sessions)
                measured[phase] = await counted(server, asyncio.gather(*(one_session(browser, link, barrier)
                                                                         for _ in range(sessions))))
        finally:
            await browser.close()
    return measured


def summary(name: str, measured: dict[str, list[dict]]) -> tuple[list[Measurement], list[str]]:
    """The rows of one experiment: each of the page's figures against the bare Streamlit page's
    in the same run (the floor), and the two goals (the first screen under 2 s, p95 of N at once
    under 3x one session's) beside the same figures of the bare page."""
    def values(phase: str, key: str) -> np.ndarray:
        return np.array([s[key] for s in measured.get(phase, []) if key in s], dtype=float)

    def at(phase: str, key: str, q: float = 50) -> float:
        """The q-th percentile over the sessions of a phase that got that far (nan if none did)."""
        found = values(phase, key)
        return float(np.percentile(found, q)) if len(found) else float("nan")

    errors = [f"{phase}: {e}" for phase, group in measured.items() for s in group for e in s["error"]]
    single, bare = at("single", "factor_table"), at("bare_single", "factor_table")
    p50, p95 = at("concurrent", "factor_table"), at("concurrent", "factor_table", 95)
    bare_p50, bare_p95 = at("bare_concurrent", "factor_table"), at("bare_concurrent", "factor_table", 95)
    chart_p95 = at("concurrent_chart", "factor_table", 95)
    sessions = len(measured["concurrent"])
    lines = [f"{name}: cold first session: factor table {at('cold', 'factor_table'):.2f} s"
             + (f" (the bare page's cold server: {at('bare_cold', 'factor_table'):.2f} s)" if "bare_cold" in measured
                else "")
             + f"; single (median of {len(measured['single'])}): factor table {single:.2f} s (bare page "
             f"{bare:.2f} s), its chart {at('single', 'chart_on_demand'):.2f} s after the click; with the chart in "
             f"the link: first chart {at('single_chart', 'first_chart'):.2f} s, factor table "
             f"{at('single_chart', 'factor_table'):.2f} s; {sessions} at once: factor table p50 {p50:.2f} s, p95 "
             f"{p95:.2f} s (bare page: p50 {bare_p50:.2f} s, p95 {bare_p95:.2f} s; chart in the link: p50 "
             f"{at('concurrent_chart', 'factor_table'):.2f} s, p95 {chart_p95:.2f} s); "
             f"sessions with an error: {sum(bool(s['error']) for g in measured.values() for s in g)}",
             f"  the server's last message of the first screen arrived at (median, s): single "
             f"{at('single', 'last_message'):.2f} (bare {at('bare_single', 'last_message'):.2f}); {sessions} at once "
             f"{at('concurrent', 'last_message'):.2f} (bare {at('bare_concurrent', 'last_message'):.2f})",
             f"  browser renderer's task time per session until its first screen was done (median, s): single "
             f"{at('single', 'renderer_cpu'):.2f} (JavaScript {at('single', 'script_cpu'):.2f}; bare page "
             f"{at('bare_single', 'renderer_cpu'):.2f}, JavaScript {at('bare_single', 'script_cpu'):.2f}), chart in "
             f"the link {at('single_chart', 'renderer_cpu'):.2f} (JavaScript {at('single_chart', 'script_cpu'):.2f}); "
             f"{sessions} at once {at('concurrent', 'renderer_cpu'):.2f} (bare "
             f"{at('bare_concurrent', 'renderer_cpu'):.2f}), chart in the link "
             f"{at('concurrent_chart', 'renderer_cpu'):.2f}"]
    def cpu(phase: str) -> str:
        server, browser = at(phase, "server_process_cpu"), at(phase, "browser_process_cpu")
        return f"{server:.2f} + {browser:.2f}"

    cores = os.cpu_count() or 1
    # N sessions' CPU on the machine's cores, were they used perfectly: no p95 can be lower.
    page_floor = sessions * (at("concurrent", "server_process_cpu") + at("concurrent", "browser_process_cpu")) / cores
    bare_floor = sessions * (at("bare_concurrent", "server_process_cpu")
                             + at("bare_concurrent", "browser_process_cpu")) / cores
    lines.append(f"  CPU seconds per session, server + browser processes (median; alone: to its first screen; at "
                 f"once: the phase's over its sessions): single {cpu('single')} (bare {cpu('bare_single')}), cold "
                 f"{cpu('cold')}; {sessions} at once {cpu('concurrent')} (bare {cpu('bare_concurrent')}); that CPU "
                 f"of {sessions} sessions on {cores} cores takes at least {page_floor:.2f} s "
                 f"({page_floor / single:.2f}x single; bare page {bare_floor:.2f} s, {bare_floor / bare:.2f}x its "
                 "single)")
    drawn, sent = values("single_chart", "first_chart"), values("single_chart", "factor_chart_arrived")
    if len(sent) == len(drawn) and len(sent):
        lines.append(f"  chart in the link, single: the chart's message arrived at {np.median(sent):.2f} s (median), "
                     f"drawn {np.median(drawn - sent):.2f} s later (the browser: loading plotly.js, rendering)")
    rows = [
        Measurement(f"{name}: single first screen / bare single", single, bare, "s", "-", None),
        Measurement(f"{name}: p95 {sessions} at once / bare p95", p95, bare_p95, "s", "-", None),
        Measurement(f"{name}: p95 {sessions} at once / single", p95, single, "s", f"<= {RATIO_GOAL:g}x",
                    p95 <= RATIO_GOAL * single and not errors),
        Measurement(f"bare page: p95 {sessions} at once / single", bare_p95, bare, "s", f"(floor of {RATIO_GOAL:g}x)",
                    None),
        Measurement(f"{name}: p50 {sessions} at once / single", p50, single, "s", "-", None),
        Measurement(f"{name}: single, chart in link / single", at("single_chart", "factor_table"), single, "s", "-",
                    None),
        Measurement(f"{name}: p95, chart in link / single", chart_p95, single, "s", "-", None),
    ]
    # The goal holds for both pages the issue names: the quickstart's and the 1,000 x 1,000 folder's.
    rows.insert(1, Measurement(f"{name}: single first screen (goal)", single, bare, "s",
                               f"< {FIRST_CHART_GOAL_S:g} s", single < FIRST_CHART_GOAL_S))
    return rows, lines + errors[:20]


PROFILED_PAGE = """
import cProfile, runpy
profiler = cProfile.Profile()
profiler.enable()
try:
    runpy.run_path({page!r}, run_name="__main__")
finally:
    profiler.disable()
    profiler.dump_stats({out!r})
"""


def profile_child(experiment: str, top: int, sessions: int) -> None:
    """The Compare page's script run through AppTest (the server's script run, no browser): cold,
    then warm as a later session finds the caches, the warm one also under cProfile. AppTest runs
    the script on a thread of its own, so the profiler is started inside the script. Every AppTest
    reuses the first one's components registry (a server discovers it once at startup; AppTest at
    each instance's first run, seconds here: bench_dashboard.py does the same)."""
    import pstats

    from streamlit.testing.v1 import AppTest

    page = str(REPO_ROOT / "dashboard" / "views" / "5_compare.py")
    registry: list = []

    def render(app) -> tuple[float, float]:
        """Wall and CPU seconds of one run (CPU of this process: on a loaded machine wall is mostly waiting)."""
        app.query_params["exp"] = experiment
        if registry:
            app._bidi_component_manager = registry[0]  # private: see the docstring
        started, cpu = time.perf_counter(), time.process_time()
        app.run()
        if app.exception:
            raise RuntimeError(f"the Compare page failed: {[e.value for e in app.exception]}")
        registry[:] = [getattr(app, "_bidi_component_manager", None)]
        return time.perf_counter() - started, time.process_time() - cpu

    render(AppTest.from_string("import streamlit as st\nst.title('another page')"))
    render(AppTest.from_file(str(BARE_PAGE)))  # its imports (pandas) loaded, as a server has them
    bare = render(AppTest.from_file(str(BARE_PAGE)))
    cold = render(AppTest.from_file(page, default_timeout=600))
    warm = render(AppTest.from_file(page, default_timeout=600))
    with tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "page.prof")
        render(AppTest.from_string(PROFILED_PAGE.format(page=page, out=out), default_timeout=600))
        # The server's side of concurrent sessions: warm script runs at once in this one process.
        with ThreadPoolExecutor(max_workers=sessions) as pool:
            together = [wall for wall, _ in pool.map(lambda _: render(AppTest.from_file(page, default_timeout=600)),
                                                     range(sessions))]
        print(f"{experiment}: page script run (wall / CPU s): cold {cold[0]:.2f} / {cold[1]:.2f} (computes the "
              f"views), warm {warm[0]:.2f} / {warm[1]:.2f}; {sessions} warm runs at once in one process (no "
              f"browser): p50 {np.percentile(together, 50):.2f} s, p95 {np.percentile(together, 95):.2f} s "
              f"({np.percentile(together, 95) / warm[0]:.1f}x the single warm run); the bare page's script run "
              f"{bare[0]:.3f} / {bare[1]:.3f} (warm run / bare: {warm[0] / bare[0]:.1f}x wall); the profile below "
              "is of another warm run")
        pstats.Stats(out).sort_stats("cumulative").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--singles", type=int, default=3, help="single-session measurements (their median)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--experiments", default=f"quickstart,{SYNTHETIC}")
    parser.add_argument("--keep", type=Path, help="a data dir to build (or reuse) both results folders in")
    parser.add_argument("--no-job", action="store_true", help="no background job")
    parser.add_argument("--profile", action="store_true", help="profile one session's script run (cProfile)")
    parser.add_argument("--top", type=int, default=40, help="lines of the profile")
    parser.add_argument("--child-profile", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Stopped (timeout, kill): leave through the context managers, which stop the server and the job.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.child_profile:
        profile_child(args.child_profile, args.top, args.sessions)
        return
    experiments = args.experiments.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = (args.keep or Path(scratch)).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        prepare(data_dir, args.runs, args.questions, experiments)
        rows: list[Measurement] = []
        print(f"load average at the start: {load_average()}", flush=True)
        with (dashboard(data_dir) as page, dashboard(data_dir, BARE_PAGE) as bare,
              (background_jobs(data_dir) if not args.no_job else _nothing()) as jobs):
            for position, name in enumerate(experiments):
                measured = asyncio.run(measure_experiment(page, bare, name, args.sessions, args.singles,
                                                          bare_cold=position == 0))
                found, said = summary(name, measured)
                print("\n".join(said), flush=True)  # each experiment as it is done: a run takes minutes
                rows += found
            if jobs is not None:
                print(f"background jobs started during the measurement: {len(jobs)}")
        print(f"load average at the end: {load_average()}")
        print_table(rows)
        if args.profile:
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": str(data_dir)}
            for name in experiments:
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child-profile", name, "--top",
                                str(args.top), "--sessions", str(args.sessions)], env=env, check=True, cwd=REPO_ROOT)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min; {os.cpu_count()} cores)"


@contextmanager
def _nothing():
    yield None


if __name__ == "__main__":
    main()
