"""Text from corpora, question sets, LLMs and results folders, shown in Streamlit markdown as text:
never as live HTML, never as a link or an image.

Streamlit reads as markdown the strings of st.markdown, st.caption, st.error/warning/info/success,
progress texts and widget labels. Two things in such a string can act: raw HTML (`<script>`,
`<img onerror=...>`, live under unsafe_allow_html) and links or images, whose target can be
`javascript:` or an address that an image fetch leaks data to. ``escape`` writes as character
references exactly the characters that start them, so an LLM's bold and lists still render and
"[1]" citations read as written:

- ``&``, ``<``, ``>``: no tag, no ``<autolink>``, no entity of the text's own is decoded;
- ``]`` right before ``(`` or ``:``: no inline link or image, no reference definition (without
  one, ``[x]`` and ``[x][y]`` stay text); markdown never reads a character reference as syntax;
- ``\\``: no backslash in the text escapes our ``&`` (nor starts a LaTeX command);
- backtick: no code span, inside which character references would show undecoded.

Character references, not backslash escapes, because they read the same in markdown and in raw
HTML: the drill-down's HTML chunk view (``html_block``) uses the same function. Text that is not
meant as markdown at all goes to st.text, st.code, st.json or st.dataframe, which never interpret it.
"""

from __future__ import annotations

import re

_REFERENCES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "&#92;", "`": "&#96;", "]": "&#93;"}
_ACTIVE = re.compile(r"[&<>\\`]|\](?=[(:])")


def escape(text: object) -> str:
    """``text`` for a Streamlit markdown string (unsafe_allow_html or not): it shows as written."""
    return _ACTIVE.sub(lambda match: _REFERENCES[match.group()], str(text))


def html_block(body: str) -> str:
    """``body`` (HTML whose text went through ``escape``) in one <div> that keeps its line breaks,
    for st.markdown with unsafe_allow_html. The line breaks are written as references so the block
    is one line: markdown reads a <div> line as raw HTML up to the next blank line only, and parses
    what follows as markdown again."""
    one_line = body.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "&#10;")
    return f"<div style='white-space: pre-wrap'>{one_line}</div>"
