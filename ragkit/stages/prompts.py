"""Prompt helpers every stage shares: chunks as numbered lines (plain, with their source, or within
a character budget), the context as one string, the conversation before a follow-up.

One home for them, so that a stage's prompt shows chunks and turns as every other stage's does
and no stage imports another stage's module for a helper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: config checks import these helpers' modules, not LlamaIndex
    from llama_index.core.schema import NodeWithScore

# Characters of a chunk's summary shown beside its source (``sourced_chunks``).
SUMMARY_CHARS = 200
# The metadata key of the document summary line the enrichment judge puts on a chunk.
PARENT_SUMMARY = "parent_summary"


class ConversationTurn(Protocol):
    """One earlier turn of a conversation (``ragkit.questions.Turn``)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


def conversation_block(history: Sequence[ConversationTurn], turns: int, chars: int) -> str:
    """The last ``turns`` turns, each on one line cut to ``chars``; empty without history."""
    if not history:
        return ""
    lines = [f"{turn.role}: {' '.join(turn.content.split())[:chars]}" for turn in list(history)[-turns:]]
    return "Conversation so far:\n" + "\n".join(lines) + "\n"


def numbered_chunks(nodes: list[NodeWithScore], chunk_chars: int,
                    label: Callable[[NodeWithScore], str] | None = None) -> str:
    """``[1] text`` lines, each cut to ``chunk_chars`` and kept on one line; ``label(node)`` before
    the text when given (``source_label``: the file name, not counted in ``chunk_chars``)."""
    lines = []
    for number, node in enumerate(nodes, start=1):
        text = " ".join(node.node.get_content().split())
        lines.append(f"[{number}] {label(node) if label is not None else ''}{text[:chunk_chars]}")
    return "\n".join(lines)


def sourced_chunks(nodes: list[NodeWithScore], chunk_chars: int) -> str:
    """``[1] (Title > Section) text`` lines: where each chunk comes from, then its text (and its
    summary, when the chunk has one, instead of nothing more than the cut text)."""
    lines = []
    for number, node in enumerate(nodes, start=1):
        meta = node.node.metadata
        source = " > ".join(str(part) for part in (meta.get("title"), meta.get("breadcrumb")) if part)
        summary = " ".join(str(meta.get("summary") or "").split())[:SUMMARY_CHARS]
        text = " ".join(node.node.get_content().split())[:chunk_chars]
        lines.append(f"[{number}] " + (f"({source}) " if source else "") + (f"Summary: {summary} Text: " if summary
                                                                          else "") + text)
    return "\n".join(lines)


def with_parent_summary(node: NodeWithScore, text: str) -> str:
    """``text`` after the summary line of the chunk's document, when the enrichment judge gave the
    chunk one (``PARENT_SUMMARY`` in its metadata, only with its ``parent_summary`` option on)."""
    parent = " ".join(str(node.node.metadata.get(PARENT_SUMMARY) or "").split())[:SUMMARY_CHARS]
    return f"(Document summary: {parent}) {text}" if parent and text else text


def shown_chunks(nodes: list[NodeWithScore], max_chunks: int, chunk_chars: int,
                 max_context_chars: int) -> list[tuple[NodeWithScore, str]]:
    """The chunks shown and their one-line text: at most ``max_chunks``, together within
    ``max_context_chars``; a chunk's parent summary line, if it has one, comes first and counts."""
    shown: list[tuple[NodeWithScore, str]] = []
    budget = max_context_chars
    for node in nodes[:max_chunks]:
        text = with_parent_summary(node, " ".join(node.node.get_content().split())[: min(chunk_chars, budget)])
        if not text:
            break
        shown.append((node, text))
        budget -= len(text)
        if budget <= 0:
            break
    return shown


def source_name(node: NodeWithScore) -> str:
    """The file a chunk comes from: its document's file name, else its document id."""
    meta = node.node.metadata
    return str(meta.get("file_name") or meta.get("doc_id") or "unknown")


def source_label(node: NodeWithScore) -> str:
    """What ``with_source_names`` puts before a chunk's text: ``(file: notes.txt) ``."""
    return f"(file: {source_name(node)}) "


def with_source_names(shown: Sequence[tuple[NodeWithScore, str]]) -> list[str]:
    """Each shown text after its file name, ``(file: notes.txt) text``. Fixed limits do not count
    the name, so the same text is shown with or without it; a window's budget does (context_fit)."""
    return [source_label(node) + text for node, text in shown]


def joined_context(contexts: Sequence[str], limit: int) -> str:
    return " ".join(" ".join(" ".join(context.split()) for context in contexts).split())[:limit]
