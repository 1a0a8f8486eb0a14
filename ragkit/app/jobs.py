"""Background jobs: `ragkit run` (an experiment) or `ragkit questions generate` (a question set)
in a detached process the dashboard can follow.

A Streamlit rerun must never compute an experiment (it would die on the next click), so the
dashboard hands the config to a JobManager, which starts the CLI in its own session. Everything
about a job lives in a folder, so a restarted dashboard sees the same jobs:

    jobs/<job_id>/config.yaml   the validated experiment config, paths made absolute (run jobs)
    jobs/<job_id>/job.json      who started what, where the results go, the child's pid
    jobs/<job_id>/status.json   progress, written by the child (--status-file)
    jobs/<job_id>/log.txt       the child's stdout and stderr
    jobs/<job_id>/cancelled     marker: a user stopped it (a SIGTERM leaves status "running")
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from ragkit.errors import ConfigError
from ragkit.experiments.config import PATH_FIELDS, ExperimentConfig, config_from_dict, config_to_yaml
from ragkit.experiments.runner import EXECUTORS
from ragkit.experiments.status import read_status
from ragkit.settings import get_settings
from ragkit.storage.atomic import write_json_atomic
from ragkit.storage.folders import is_remote

JobKind = Literal["run", "questions"]
JobState = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
ACTIVE_STATES = ("queued", "running")
RESUMABLE_STATES = ("cancelled", "interrupted", "failed")
LOG_TAIL_LINES = 20
CANCEL_GRACE_S = 5.0


class Job(BaseModel):
    """What job.json holds: fixed when the job starts, except pid, which each resume replaces."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    experiment: str  # a question-generation job: the set's name
    out_dir: str
    created: datetime
    pid: int
    command: list[str]
    kind: JobKind = "run"  # job.json files written before generation jobs existed are runs


class JobInfo(BaseModel):
    """A job as the dashboard shows it: the record plus live state read from disk and /proc."""

    job_id: str
    experiment: str
    out_dir: str
    created: datetime
    state: JobState
    kind: JobKind = "run"
    done: int = 0
    total: int | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None
    error: str | None = None
    outcome: dict[str, Any] | None = None  # what a finished job yielded: {summary, poor, advice, ...}
    log_tail: str = ""
    detail: str | None = None  # what a running job does besides questions (an index build), with its own ETA
    # What done and total count, as the job's status file names it; a file written before it did:
    # a run counts questions, a question-generation job LLM calls.
    unit: str = "questions"

    def state_text(self) -> str:
        """The state as a page shows it: "done", or "done · kept 5 of 40 (12%): poor yield ..."."""
        return f"{self.state} · {self.outcome['summary']}" if self.outcome else self.state


def _process_alive(pid: int) -> bool:
    """True while `pid` is a running (not zombie) `ragkit run` process."""
    try:
        # Our own child: reap it if it exited, or it lingers as a zombie that kill(pid, 0) accepts.
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        # Not reaped: our child is running. Its /proc cmdline can read empty for a moment after
        # exec, so the checks below, meant for someone else's pid, would call it dead.
        return reaped != pid
    except ChildProcessError:
        pass  # started by another (e.g. an earlier dashboard) process; ask the OS instead
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True
    try:
        # The state letter follows the parenthesised command name, which may itself hold spaces.
        if proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        # After a reboot or a long time the pid may belong to an unrelated process.
        # Empty right after exec (see above) or for a kernel thread: unknown, so not called dead.
        cmdline = proc.joinpath("cmdline").read_bytes()
        return not cmdline or b"ragkit.cli" in cmdline
    except (OSError, IndexError):
        return False


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class JobManager:
    def __init__(self, jobs_dir: Path | None = None) -> None:
        self.jobs_dir = Path(jobs_dir) if jobs_dir else get_settings().resolved_data_dir() / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)

    def start(self, config: ExperimentConfig | dict[str, Any], out_dir: Path | None = None,
              executor: str = "local") -> Job:
        """Start ``ragkit run`` on this config in a background process; ``executor`` is
        ``local`` or ``ray`` (a local Ray for the run)."""
        data = config.model_dump(mode="json") if isinstance(config, ExperimentConfig) else dict(config)
        data = self._absolute_paths(data)
        # Validate before any folder or process exists, so a bad config leaves no trace.
        validated = config_from_dict(data, source="job config")
        if executor not in EXECUTORS:
            raise ConfigError(f"unknown executor '{executor}'. Valid executors: {', '.join(EXECUTORS)}")
        if executor == "ray":
            from ragkit.experiments.ray_executor import require_ray

            require_ray()
        out = Path(out_dir).expanduser().resolve() if out_dir else get_settings().results_root() / validated.name
        self._refuse_second_writer(out)
        stamp = datetime.now(UTC)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", validated.name).strip("-")[:40] or "experiment"
        job_id = f"{stamp:%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:6]}"
        folder = self.jobs_dir / job_id
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(config_to_yaml(validated), encoding="utf-8")
        command = [sys.executable, "-m", "ragkit.cli", "run", str(folder / "config.yaml"), "--out", str(out),
                   "--status-file", str(folder / "status.json"), "--quiet", "--executor", executor]
        job = Job(job_id=job_id, experiment=validated.name, out_dir=str(out), created=stamp, pid=0, command=command)
        return self._launch(job)

    def start_generation(self, corpus: str, out_dir: Path, *, n: int, types: list[str], seed: int = 0,
                         llm: str | None = None, embeddings: bool = True, method: str = "llm") -> Job:
        """Start ``ragkit questions generate`` on ``corpus`` (a dataset folder or corpus name) into
        ``out_dir``; its progress is LLM calls made of those planned (extractive: questions), its
        outcome the kept questions of those asked."""
        from ragkit.questions.generation import GenerationParams
        from ragkit.questions.generation.writer import check_out
        from ragkit.questions.sources import validated

        # Validate before any folder or process exists, as start() does.
        params = validated(GenerationParams, {"n": n, "types": types, "seed": seed, "method": method})
        if llm is not None:
            from ragkit.llms import llms

            llms.get(llm)  # an unknown name is a one-line ConfigError listing the valid ones
        out = Path(out_dir).expanduser().resolve()
        check_out(out)
        self._refuse_second_writer(out)
        corpus_path = Path(corpus).expanduser()
        argument = str(corpus_path.resolve()) if corpus_path.exists() else corpus  # else an ingested corpus name
        stamp = datetime.now(UTC)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", out.name).strip("-")[:40] or "questions"
        job_id = f"{stamp:%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:6]}"
        folder = self.jobs_dir / job_id
        folder.mkdir(parents=True)
        command = [sys.executable, "-m", "ragkit.cli", "questions", "generate", argument, "--n", str(params.n),
                   "--method", params.method, "--types", ",".join(params.types), "--seed", str(params.seed),
                   "--out", str(out),
                   "--status-file", str(folder / "status.json")]
        command += ["--llm", llm] if llm and params.method == "llm" else []
        command += [] if embeddings else ["--no-embeddings"]
        job = Job(job_id=job_id, experiment=out.name, out_dir=str(out), created=stamp, pid=0, command=command,
                  kind="questions")
        return self._launch(job)

    def list(self) -> list[JobInfo]:
        infos = [self.get(p.name) for p in self.jobs_dir.iterdir() if (p / "job.json").exists()]
        return sorted(infos, key=lambda info: info.created, reverse=True)

    def get(self, job_id: str) -> JobInfo:
        job = self._record(job_id)
        folder = self.jobs_dir / job_id
        status = read_status(folder / "status.json")
        alive = _process_alive(job.pid)
        log_tail = _tail(folder / "log.txt")
        info = JobInfo(job_id=job.job_id, experiment=job.experiment, out_dir=job.out_dir, created=job.created,
                       state="queued", kind=job.kind, log_tail=log_tail)
        if status is None:
            # No status yet: the child is still loading the dataset, or it died before the status
            # writer existed (a bad dataset path exits with code 2), and the log says why.
            info.state = "queued" if alive else "failed"
            info.elapsed_s = time.time() - job.created.timestamp()
            if not alive:
                info.error = next((line for line in reversed(log_tail.splitlines()) if line.strip()), "exited")
        else:
            info.done, info.total, info.error = status["done"], status["total"], status.get("error")
            info.unit = status.get("unit") or ("questions" if job.kind == "run" else "LLM calls")
            info.outcome = status.get("outcome")
            finished = status["state"] != "running" or not alive
            info.elapsed_s = (status["updated"] if finished else time.time()) - status["started"]
            if status["state"] == "running":
                info.state = "running" if alive else "interrupted"
            else:
                info.state = status["state"]
            info.detail = status.get("detail") if info.state == "running" else None
            # While an index is built no question advances: the detail carries the build's own ETA,
            # and a questions ETA from the rate so far would only climb.
            if info.state == "running" and info.total and 0 < info.done and not info.detail:
                info.eta_s = info.elapsed_s / info.done * (info.total - info.done)
        if (folder / "cancelled").exists() and info.state != "done":
            info.state = "cancelled"
            info.eta_s = None
        return info

    def cancel(self, job_id: str) -> JobInfo:
        job = self._record(job_id)
        if self.get(job_id).state not in ACTIVE_STATES:
            return self.get(job_id)
        # The marker first: once the process dies, its leftover "running" status must read as cancelled.
        (self.jobs_dir / job_id / "cancelled").touch()
        self._signal_group(job.pid, signal.SIGTERM)
        deadline = time.monotonic() + CANCEL_GRACE_S
        while _process_alive(job.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _process_alive(job.pid):
            self._signal_group(job.pid, signal.SIGKILL)
            while _process_alive(job.pid):
                time.sleep(0.05)
        return self.get(job_id)

    def resume(self, job_id: str) -> JobInfo:
        job = self._record(job_id)
        state = self.get(job_id).state
        if state not in RESUMABLE_STATES:
            raise ConfigError(f"job '{job_id}' is {state}; only {', '.join(RESUMABLE_STATES)} jobs can be resumed")
        self._refuse_second_writer(Path(job.out_dir))
        folder = self.jobs_dir / job_id
        (folder / "cancelled").unlink(missing_ok=True)
        # A stale status of the dead process would read as "interrupted" until the new child writes.
        (folder / "status.json").unlink(missing_ok=True)
        # The results store skips committed questions, so the same command continues the work.
        self._launch(job)
        return self.get(job_id)

    def dataset_of(self, out_dir: str | Path) -> str | None:
        """The dataset path of the job that wrote ``out_dir``, when a job of this manager did (jobs
        write local folders only); None for any other folder."""
        if is_remote(out_dir):
            return None
        target = Path(out_dir).resolve()
        for folder in sorted(self.jobs_dir.iterdir()) if self.jobs_dir.exists() else []:
            try:
                job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
                if Path(job["out_dir"]).resolve() == target:
                    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
                    return str(config["dataset"]["path"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a job folder half written or edited by hand
        return None

    def delete(self, job_id: str) -> None:
        if self.get(job_id).state in ACTIVE_STATES:
            self.cancel(job_id)
        shutil.rmtree(self.jobs_dir / job_id)

    def _launch(self, job: Job) -> Job:
        folder = self.jobs_dir / job.job_id
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # so log.txt is live, not block-buffered
        with (folder / "log.txt").open("ab") as log:
            # A new session detaches the child from the dashboard: it survives a rerun or restart,
            # and cancel can signal its whole process group.
            process = subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
        job = job.model_copy(update={"pid": process.pid})
        write_json_atomic(folder / "job.json", job.model_dump(mode="json"))
        return job

    def _record(self, job_id: str) -> Job:
        path = self.jobs_dir / job_id / "job.json"
        if not path.exists():
            known = sorted((p.name for p in self.jobs_dir.iterdir() if (p / "job.json").exists()), reverse=True)
            raise ConfigError(f"unknown job '{job_id}'. Known jobs: {', '.join(known) or '(none)'}")
        return Job.model_validate_json(path.read_text(encoding="utf-8"))

    def _refuse_second_writer(self, out_dir: Path) -> None:
        # Two processes filling one results folder would compute the same questions twice.
        for info in self.list():
            if info.state in ACTIVE_STATES and Path(info.out_dir) == out_dir:
                raise ConfigError(f"job '{info.job_id}' is already writing results to {out_dir}; wait or cancel it")

    @staticmethod
    def _absolute_paths(data: dict[str, Any]) -> dict[str, Any]:
        # The child reads config.yaml from the job folder, where relative paths would mean something else.
        data = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
        for section, field in PATH_FIELDS:
            block = data.get(section)
            if isinstance(block, dict) and isinstance(block.get(field), str):
                block[field] = str(Path(block[field]).expanduser().resolve())
        return data

    @staticmethod
    def _signal_group(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)  # start_new_session made the child its group's leader: pgid == pid
        except ProcessLookupError:
            pass
