"""What the dashboard uses beside the library: background jobs (``jobs``) and uploaded files
(``uploads``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "JobManager": "ragkit.app.jobs",
    "save_uploads": "ragkit.app.uploads",
}

__all__ = ["JobManager", "save_uploads"]

__getattr__ = lazy_exports(__name__, _WHERE)
