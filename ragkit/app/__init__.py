"""What the dashboard uses beside the library: background jobs (``jobs``) and uploaded files
(``uploads``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "JobManager": "ragkit.app.jobs",
    "save_uploads": "ragkit.app.uploads",
}

__all__ = ["JobManager", "save_uploads"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
