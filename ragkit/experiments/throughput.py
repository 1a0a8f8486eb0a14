"""What this machine has measured: chunks embedded per second per embedder, seconds per LLM call
per backend. The executor adds to it as runs happen; a dry run turns it into a time estimate.

**Calibration** (``calibrate``): a component with no measurement yet is measured at first use, in
seconds: the model is loaded first (a warm-up, not timed), then a small piece of real work is
timed (the estimate embeds a few dozen chunks of the corpus, and sends one short prompt), and the
result is added like any other measurement. A short prompt is faster than a run's real ones, so
an LLM's first estimate is a lower bound until a run measures it; the label says "calibration".

One small JSON file under the data directory, ``throughput.json``, rewritten atomically under a
lock (read, add, write), so two executors adding at once lose neither measurement. Totals are
kept (items and seconds), so the rate is over everything measured, not the last run alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragkit.storage.atomic import write_json_atomic
from ragkit.storage.locks import hold

Kind = Literal["embedders", "llms"]
FILE_NAME = "throughput.json"
# Adding a measurement waits at most this long for another writer; a measurement is not worth more.
LOCK_WAIT_S = 10.0


@dataclass(frozen=True)
class Measurement:
    label: str  # what a person reads: "minilm", "local:SmolLM2-135M"
    items: int  # chunks embedded, or LLM calls answered by the backend
    seconds: float

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else float("inf")

    @property
    def seconds_per_item(self) -> float:
        return self.seconds / self.items if self.items else 0.0


def throughput_path(data_dir: Path) -> Path:
    return Path(data_dir) / FILE_NAME


def read_throughput(data_dir: Path) -> dict[str, dict[str, Measurement]]:
    """kind -> component key -> its measurement; an unreadable file is as no measurement."""
    try:
        raw = json.loads(throughput_path(data_dir).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"embedders": {}, "llms": {}}
    out: dict[str, dict[str, Measurement]] = {}
    for kind in ("embedders", "llms"):
        entries = raw.get(kind) if isinstance(raw, dict) else None
        out[kind] = {key: Measurement(str(v.get("label", key)), int(v["items"]), float(v["seconds"]))
                     for key, v in (entries or {}).items()
                     if isinstance(v, dict) and "items" in v and "seconds" in v}
    return out


def record_throughput(data_dir: Path, kind: Kind, key: str, label: str, items: int, seconds: float) -> None:
    """Add ``items`` done in ``seconds`` to the measurement of ``key``; nothing for no items."""
    if items <= 0 or seconds <= 0:
        return
    path = throughput_path(data_dir)
    with hold(path.with_suffix(".lock"), "throughput measurements", LOCK_WAIT_S):
        current = read_throughput(data_dir)
        old = current[kind].get(key, Measurement(label, 0, 0.0))
        current[kind][key] = Measurement(label, old.items + items, old.seconds + seconds)
        write_json_atomic(path, {name: {k: {"label": m.label, "items": m.items, "seconds": m.seconds}
                                        for k, m in entries.items()} for name, entries in current.items()})


CALIBRATION = "calibration"


def calibrate(data_dir: Path, kind: Kind, key: str, label: str, warm_up: Callable[[], object],
              work: Callable[[], int]) -> Measurement:
    """Measure ``key`` now: ``warm_up()`` untimed (loading the model), then ``work()`` timed (it
    returns the items it did); the measurement is recorded and returned, labelled as a calibration."""
    import time

    warm_up()
    started = time.perf_counter()
    items = work()
    seconds = max(time.perf_counter() - started, 1e-6)
    record_throughput(data_dir, kind, key, f"{label} ({CALIBRATION})", items, seconds)
    return Measurement(label, items, seconds)
