"""The chunker registry: built-in names -> classes (imported on first use) and their light info
classes (``ragkit.chunkers.params``), so a config is validated and planned without LlamaIndex."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragkit.chunkers.params import ChunkerInfo
from ragkit.registry import Registry

if TYPE_CHECKING:
    from ragkit.chunkers.base import Chunker

_INFOS = "ragkit.chunkers.params"

# The built-ins, by import path (loaded on first use); plugins join through entry points.
chunkers: Registry[Chunker, ChunkerInfo] = Registry("chunker", builtins={
    "token": "ragkit.chunkers.token:TokenChunker",
    "sentence": "ragkit.chunkers.sentence:SentenceChunker",
    "recursive": "ragkit.chunkers.recursive:RecursiveChunker",
    "markdown": "ragkit.chunkers.markdown:MarkdownChunker",
    "semantic": "ragkit.chunkers.semantic:SemanticChunker",
    "code": "ragkit.chunkers.code:CodeChunker",
    "llm_semantic": "ragkit.chunkers.llm_semantic:LLMSemanticChunker",
    "document": "ragkit.chunkers.document:DocumentChunker",
    "by_file_type": "ragkit.chunkers.by_file_type:ByFileTypeChunker",
}, infos={
    "token": f"{_INFOS}:TokenChunkerInfo",
    "sentence": f"{_INFOS}:SentenceChunkerInfo",
    "recursive": f"{_INFOS}:RecursiveChunkerInfo",
    "markdown": f"{_INFOS}:MarkdownChunkerInfo",
    "semantic": f"{_INFOS}:SemanticChunkerInfo",
    "code": f"{_INFOS}:CodeChunkerInfo",
    "llm_semantic": f"{_INFOS}:LLMSemanticChunkerInfo",
    "document": f"{_INFOS}:DocumentChunkerInfo",
    "by_file_type": f"{_INFOS}:ByFileTypeChunkerInfo",
})


def judge_choosable_chunkers() -> list[str]:
    """The registered chunkers the Chunking Judge may name: not those that call an LLM themselves
    (the judge's choice would start a second LLM pass per document), nor those that choose a cut
    per document themselves (``judge_choosable = False``: by_file_type), which the judge would
    only wrap; a chunk set's key lists these names, so a new dispatcher changes no judge's id."""
    return [name for name in chunkers.names() if not getattr(chunkers.info(name), "uses_llm", False)
            and getattr(chunkers.info(name), "judge_choosable", True)]
