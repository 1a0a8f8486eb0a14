"""The Chunking Judge: the stage (``stage``), its info and params (``params``, no LlamaIndex), and
its per-file-type size rules (``sizes``).

Public names load on first access (PEP 562), so importing one submodule stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.stages.chunking.params import ChunkingJudgeInfo
    from ragkit.stages.chunking.stage import ChunkingJudge

_WHERE = {
    "ChunkingJudge": "ragkit.stages.chunking.stage",
    "ChunkingJudgeInfo": "ragkit.stages.chunking.params",
}

__all__ = ["ChunkingJudge", "ChunkingJudgeInfo"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ragkit.stages.chunking.stage' has no attribute {name!r}")
