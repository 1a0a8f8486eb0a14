"""The Chunking Judge: the stage (``stage``), its info and params (``params``, no LlamaIndex), and
its per-file-type size rules (``sizes``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ChunkingJudge": "ragkit.stages.chunking.stage",
    "ChunkingJudgeInfo": "ragkit.stages.chunking.params",
}

__all__ = ["ChunkingJudge", "ChunkingJudgeInfo"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
