"""What the dashboard uses beside the library: background jobs (``jobs``) and uploaded files
(``uploads``).

Public names load on first access (PEP 562), so importing one submodule stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.app.jobs import JobManager
    from ragkit.app.uploads import save_uploads

_WHERE = {
    "JobManager": "ragkit.app.jobs",
    "save_uploads": "ragkit.app.uploads",
}

__all__ = ["JobManager", "save_uploads"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ragkit.app' has no attribute {name!r}")
