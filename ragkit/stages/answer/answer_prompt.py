"""The generator's prompt as the agentic design lays it out: XML-structured, and told how far to
trust its sources by the retrieval's quality.

Two generator options, each off by default (the prompt is then the plain one of
``ragkit.stages.answer.generator.build_prompt``, byte for byte):

- ``prompt_layout: xml``: every part in its own element, in this order: ``<example>`` (the same
  worked example as the plain layout, in this layout), ``<conversation>`` (earlier turns, when
  the question is a follow-up), ``<sources>`` with one ``<source id="n">`` per chunk (the numbers
  the answer cites; with ``show_file_name`` a ``file`` attribute, not a label inside the text),
  ``<question>``, ``<feedback>`` (claims a groundedness check did not find supported, when
  regenerating), ``<quality>`` (below) and ``<instructions>``. With ``context_in: system`` the
  ``<sources>`` element goes to the system message instead.
- ``quality_instructions: true``: an instruction chosen by the retrieval quality (the quality
  gate's, 0-1) the pipeline passes in: above ``quality_high`` (0.8) answer directly from the
  sources; above ``quality_low`` (0.6) answer what the sources support and say what they leave
  out; otherwise say when the sources do not answer and add nothing they do not state. An unknown
  quality (no gate, a binary LLM gate, the web route) adds no instruction, and the answer records
  which tier it got (``decision["quality_tier"]``).

Text inside an element is escaped (``xml.sax.saxutils``), so a chunk holding ``</source>`` cannot
close its element early.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

PromptLayout = Literal["plain", "xml"]
QualityTier = Literal["high", "medium", "low"]

QUALITY_TEXT: dict[str, str] = {
    "high": "The sources are highly relevant to the question: answer directly and confidently from them.",
    "medium": "The sources are partly relevant: answer with what they support and say what they do not cover.",
    "low": "The sources may not answer the question: use only what they state, and say so if they do not "
    "answer it.",
}

EXAMPLE_SOURCES = (("Stocks fell after the rate rise.", None), ("Air scatters blue light more than red light.", None))


def quality_tier(quality: float | None, high: float, low: float) -> QualityTier | None:
    """The design's tier of a retrieval quality: above ``high``, above ``low``, or below; None
    when the quality is unknown."""
    if quality is None:
        return None
    if quality > high:
        return "high"
    return "medium" if quality > low else "low"


def xml_sources(texts: Sequence[str], files: Sequence[str | None] = ()) -> str:
    """``<sources>`` with one ``<source id="n">`` per text, numbered from 1; ``files[i]`` (when
    given and not None) as the source's ``file`` attribute."""
    if not texts:
        return "<sources></sources>"
    lines = []
    for number, text in enumerate(texts, start=1):
        file = files[number - 1] if number - 1 < len(files) else None
        attribute = f" file={quoteattr(file)}" if file is not None else ""
        lines.append(f'<source id="{number}"{attribute}>{escape(text)}</source>')
    return "<sources>\n" + "\n".join(lines) + "\n</sources>"


def xml_prompt(query: str, texts: Sequence[str], files: Sequence[str | None], *, ask: str, example_reply: str,
               feedback: Sequence[str] = (), conversation: str = "", sources_here: bool = True,
               quality: str = "") -> str:
    """The answer prompt in the XML layout; ``ask`` and ``example_reply`` are the plain layout's
    (JSON or free text), ``quality`` the tier's instruction (empty: none), ``sources_here`` False
    when the sources are in the system message."""
    example_sources = xml_sources([text for text, _ in EXAMPLE_SOURCES])
    parts = [f"<example>\n{example_sources}\n<question>Why is the sky blue?</question>\n"
             f"<answer>{escape(example_reply)}</answer>\n</example>"]
    if conversation:
        parts.append(f"<conversation>\n{escape(conversation.strip())}\n</conversation>")
    if sources_here:
        parts.append(xml_sources(texts, files))
    parts.append(f"<question>{escape(query)}</question>")
    if feedback:
        listed = "\n".join(f"<claim>{escape(claim)}</claim>" for claim in feedback)
        parts.append("<feedback>These statements were not supported by the sources; do not repeat them unless a "
                     f"source states them:\n{listed}\n</feedback>")
    if quality:
        parts.append(f"<quality>{escape(quality)}</quality>")
    parts.append(f"<instructions>{escape(ask)}</instructions>")
    return "\n".join(parts)
