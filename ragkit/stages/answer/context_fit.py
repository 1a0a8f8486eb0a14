"""How much of the retrieved context the generator shows: fixed limits, or the model's window.

``fixed`` (the default): each chunk cut to
``chunk_chars`` characters, all of them together to ``max_context_chars``. ``window``: whole chunks
first, in rank order, as many as the model's context window holds once the prompt around them and
the answer's tokens are counted; the first chunk that does not fit whole is cut to what is left,
and the chunks after it are left out. A backend that declares no window
(``LLMBackend.context_window``: an OpenAI-compatible server, or the bundled SmolLM2-135M, too
small to use a long context) keeps the fixed limits.

Tokens are estimated from characters, because not every backend can count them before the call
(Ollama tokenises on the server). Either way the answer records what was cut (``cut_record``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ragkit.stages.prompts import shown_chunks, with_parent_summary

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

ContextFitMode = Literal["fixed", "window"]

# English text runs about 4 characters a token in the BPE vocabularies of current models; 3 keeps
# a quarter of the estimate in reserve for numbers, names and other languages, which cut finer.
CHARS_PER_TOKEN = 3
# The chat template's role markers and separators around the messages, in tokens.
TEMPLATE_TOKENS = 32
# "[n] " before each source and the line break after it.
LINE_OVERHEAD_CHARS = 6


@dataclass(frozen=True)
class FittedContext:
    shown: list[tuple[NodeWithScore, str]]  # the chunks shown and their one-line text
    record: dict[str, Any]  # how it was sized and what was cut, for the generator's judgement


def one_line(node: NodeWithScore) -> str:
    """The chunk as the prompt shows it whole: one line, after its document's summary line when the
    enrichment judge gave it one (``parent_summary``), as ``shown_chunks`` shows it."""
    return with_parent_summary(node, " ".join(node.node.get_content().split()))


def window_budget_chars(window_tokens: int, answer_tokens: int, prompt_chars: int) -> int:
    """Characters of sources that fit in ``window_tokens`` beside a prompt of ``prompt_chars``
    characters without sources (system message included) and an answer of ``answer_tokens``."""
    free = window_tokens - answer_tokens - TEMPLATE_TOKENS - math.ceil(prompt_chars / CHARS_PER_TOKEN)
    return max(0, free) * CHARS_PER_TOKEN


def no_label(node: NodeWithScore) -> str:
    return ""


def whole_chunks_first(nodes: list[NodeWithScore], max_chunks: int, budget_chars: int,
                       label: Callable[[NodeWithScore], str] = no_label) -> list[tuple[NodeWithScore, str]]:
    """Chunks in rank order, each whole while it fits in ``budget_chars``; the first that does not
    fit is cut to what is left (when anything is), and none after it is shown. ``label(node)`` is
    what the prompt puts before a chunk's text (its file name, ``show_file_name``): it takes room
    in the window like the text, so it is counted with each line's overhead."""
    shown: list[tuple[NodeWithScore, str]] = []
    budget = budget_chars
    for node in nodes[:max_chunks]:
        text = one_line(node)
        overhead = LINE_OVERHEAD_CHARS + len(label(node))
        room = budget - overhead
        if not text or room <= 0:
            break
        shown.append((node, text[:room]))
        budget -= min(len(text), room) + overhead
        if len(text) > room:
            break
    return shown


def cut_record(nodes: list[NodeWithScore], shown: list[tuple[NodeWithScore, str]]) -> dict[str, int]:
    """What the shown context left of ``nodes``: chunks whole, cut, left out, characters dropped
    (of the chunks' one-line text)."""
    lengths = [len(one_line(node)) for node in nodes]
    shown_lengths = [len(text) for _, text in shown]
    cut = sum(shown_length < length for shown_length, length in zip(shown_lengths, lengths))
    return {"chunks_whole": len(shown) - cut, "chunks_cut": cut, "chunks_left_out": len(nodes) - len(shown),
            "chars_dropped": sum(lengths) - sum(shown_lengths)}


def fit_context(nodes: list[NodeWithScore], mode: ContextFitMode, *, max_chunks: int, chunk_chars: int,
                max_context_chars: int, window_tokens: int | None, answer_tokens: int,
                prompt_chars: int, label: Callable[[NodeWithScore], str] = no_label) -> FittedContext:
    """The chunks the generator shows, sized by ``mode`` (see the module docstring), and the record
    of how: ``sizing`` (``fixed`` or ``window``), the window and budget used, and ``cut_record``.
    ``label``: what precedes each chunk's text in the prompt, counted against a window's budget."""
    if mode == "window" and window_tokens is not None:
        budget = window_budget_chars(window_tokens, answer_tokens, prompt_chars)
        shown = whole_chunks_first(nodes, max_chunks, budget, label)
        sizing: dict[str, Any] = {"sizing": "window", "window_tokens": window_tokens, "budget_chars": budget}
    else:
        shown = shown_chunks(nodes, max_chunks, chunk_chars, max_context_chars)
        sizing = {"sizing": "fixed", "chunk_chars": chunk_chars, "budget_chars": max_context_chars}
        if mode == "window":
            sizing["reason"] = "the model declares no context window to size from"
    return FittedContext(shown, {**sizing, **cut_record(nodes, shown)})
