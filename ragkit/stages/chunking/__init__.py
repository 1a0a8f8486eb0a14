"""The Chunking Judge: the stage (``stage``), its info and params (``params``, no LlamaIndex), and
its per-file-type size rules (``sizes``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "ChunkingJudge": "ragkit.stages.chunking.stage",
    "ChunkingJudgeInfo": "ragkit.stages.chunking.params",
}

__all__ = ["ChunkingJudge", "ChunkingJudgeInfo"]

__getattr__ = lazy_exports(__name__, _WHERE)
