"""Atomic file writes: a crash leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    _atomic_write(path, lambda tmp: tmp.write_bytes(data))


def write_json_atomic(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    _atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_parquet_atomic(path: Path, frame: pd.DataFrame) -> None:
    _atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))
