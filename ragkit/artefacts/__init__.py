"""What a run builds once and shares: chunk sets (``chunksets``), indexes (``index``), indexes
built from streamed windows (``index_stream``, ``window_embedding``), and artefacts shared through
object storage (``sharing``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "load_or_build_chunkset": "ragkit.artefacts.chunksets",
    "load_or_build_judged_chunkset": "ragkit.artefacts.chunksets",
    "AnnParams": "ragkit.artefacts.index",
    "ChunkIndex": "ragkit.artefacts.index",
    "Hit": "ragkit.artefacts.index",
    "IndexStore": "ragkit.artefacts.index",
    "ArtefactSync": "ragkit.artefacts.sharing",
    "SharedArtefacts": "ragkit.artefacts.sharing",
}

__all__ = [
    "AnnParams",
    "ArtefactSync",
    "ChunkIndex",
    "Hit",
    "IndexStore",
    "SharedArtefacts",
    "load_or_build_chunkset",
    "load_or_build_judged_chunkset",
]

__getattr__ = lazy_exports(__name__, _WHERE)
