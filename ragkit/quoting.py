"""Bounded echoes of user values: what an error message may quote of what a user wrote.

A message that names the bad value helps; one that repeats a 10 MB value (or a nested structure
whose printed form is hundreds of megabytes) is no longer one line. Every message quoting a
user's value goes through ``quoted`` (a repr) or ``clipped`` (text as written), and a
``ConfigError`` clips its whole message to ``MESSAGE_CHARS`` as the last guard.

The repr is the standard library's ``reprlib``: its work is bounded by the limits below (it
prints at most ``maxlevel`` levels and a few items per level), so quoting a huge structure costs
no more than quoting a small one.
"""

from __future__ import annotations

import reprlib
from typing import Any

# What one quoted value may take in a message, and what a whole message may take.
QUOTE_CHARS = 200
MESSAGE_CHARS = 1000

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = QUOTE_CHARS
_REPR.maxother = QUOTE_CHARS
_REPR.maxlong = 40
for _limit in ("maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdeque", "maxarray", "maxdict"):
    setattr(_REPR, _limit, 6)


def clipped(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` itself when it is at most ``limit`` characters, else its start and its length, in
    ``limit`` characters."""
    if len(text) <= limit:
        return text
    suffix = f"... ({len(text):,} characters in all)"
    return text[: max(limit - len(suffix), 0)] + suffix


def quoted(value: Any) -> str:
    """The repr of ``value`` in at most ``QUOTE_CHARS`` characters; a long string keeps its start
    and says how long it was."""
    if isinstance(value, str) and len(value) > QUOTE_CHARS:
        suffix = f"... ({len(value):,} characters in all)"
        budget = QUOTE_CHARS - len(suffix)
        return repr(value[:budget])[:budget] + suffix
    return clipped(_REPR.repr(value))


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters (for a terminal or a page)."""
    return clipped(" ".join(text.splitlines()), limit)
