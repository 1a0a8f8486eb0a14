"""Hypothesis profiles and the hostile inputs shared by the loader and chunker fuzz tests.

``RAGKIT_FUZZ`` picks the profile. Unset (or "ci"), each fuzz test runs a small, derandomised
sample, so CI stays quick and a failure reproduces; ``RAGKIT_FUZZ=full`` runs the long search
(over 10,000 cases across the fuzz tests; see docs/reliability.md):

    RAGKIT_FUZZ=full python -m pytest -k fuzz -p no:cacheprovider --hypothesis-show-statistics
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROFILE = os.environ.get("RAGKIT_FUZZ", "ci")
if PROFILE not in ("ci", "full"):
    raise ValueError(f"RAGKIT_FUZZ must be 'ci' or 'full', got {PROFILE!r}")


def fuzz_settings(ci: int = 25, full: int = 600) -> settings:
    """Examples per test in each profile; no example database is written into the checkout.

    No deadline in either profile: how long one example takes says as much about the machine's
    load as about the code, so a deadline fails at random. A quadratic regex or parser on one long
    line is caught by the linear-time tests, which measure the process's own CPU time.
    """
    return settings(
        max_examples=full if PROFILE == "full" else ci,
        derandomize=PROFILE == "ci",
        database=None,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
            HealthCheck.large_base_example,
        ],
        print_blob=True,
    )


# --- text ----------------------------------------------------------------------------------------

WHITESPACE = " \t\n\r\x0b\x0c\u00a0\u1680\u2000\u2028\u2029\u3000\u200b\ufeff"
# Characters that split, join or vanish in tokenizers and sentence splitters.
AWKWARD = ".!?;:,-_=#*>`~|\\/()[]{}<>\"'\u2026\u3002\uff01\u00bf\u0301\u200d\ufffd\U0001f600\U0001f1fa\U0001f1f8"

random_unicode = st.text(st.characters(codec="utf-8"), max_size=400)
whitespace_only = st.text(st.sampled_from(WHITESPACE), max_size=200)
awkward_text = st.text(st.sampled_from(AWKWARD + WHITESPACE + "ab1 "), max_size=400)


@st.composite
def huge_line(draw: st.DrawFn) -> str:
    """One line of up to tens of thousands of characters, in a few long runs with no line break.

    Runs of different characters side by side ("# x", spaces, then hashes) are what make a
    backtracking regex take minutes.
    """
    units = ["word ", "0", "-", "=", "ab", "\u65e5\u672c", ". ", "#", " ", "\t", "x,", "`", "*", "[", "(", "|", "> "]
    runs = draw(st.lists(st.tuples(st.sampled_from(units), st.integers(1, 20_000)), min_size=1, max_size=4))
    prefix = draw(st.sampled_from(["", "# x", "## ", "    ", "> ", "- ", "1. "]))
    return prefix + "".join(unit * count for unit, count in runs) + draw(st.sampled_from(["", " y", "#", "\n"]))


@st.composite
def nested_markdown(draw: st.DrawFn) -> str:
    """Quotes, lists and headers nested hundreds deep, fences left open, setext underlines."""
    depth = draw(st.integers(1, 400))
    pieces = draw(st.lists(st.sampled_from([
        "> " * depth + "quoted\n",
        "  " * depth + "- item\n",
        "#" * draw(st.integers(1, 8)) + " " + "Header " * draw(st.integers(0, 3)) + "\n",
        "```" + "`" * draw(st.integers(0, 3)) + "\n",
        "~~~\n",
        "Title\n" + "=" * draw(st.integers(1, 40)) + "\n",
        "para " * draw(st.integers(1, 50)) + "\n\n",
        "[" * depth + "link" + "](x)" * depth + "\n",
        "    indented code\n",
        "---\n",
        "| a | b |\n|---|---|\n",
        "<div>" * depth + "\n",
    ]), max_size=30))
    return "".join(pieces)


PYTHON_SAMPLE = (
    '"""Module."""\nimport os\n\n\n@decorator\ndef f(x):\n    """Doc."""\n    return x + 1\n\n\n'
    "class C(Base):\n    # comment\n    def m(self):\n        if self:\n            pass\n\n"
    "async def g():\n    await h()\n\nx = [1, 2,\n     3]\n"
)


@st.composite
def broken_python(draw: st.DrawFn) -> str:
    """Python source with random edits: deleted, doubled or inserted characters, deep brackets."""
    text = PYTHON_SAMPLE * draw(st.integers(1, 3))
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["delete", "insert", "brackets", "indent", "tab"]))
        if edit == "delete":
            text = text[:position] + text[position + draw(st.integers(1, 20)):]
        elif edit == "insert":
            inserted = draw(st.sampled_from(["(", ")", ":", "\n", "'''", '"', "def", "\\", "\r"]))
            text = text[:position] + inserted + text[position:]
        elif edit == "brackets":
            depth = draw(st.integers(50, 2_000))
            text = text[:position] + "(" * depth + "x" + ")" * draw(st.integers(0, depth)) + text[position:]
        elif edit == "indent":
            text = text[:position] + " " * draw(st.integers(1, 200)) + text[position:]
        else:
            text = text[:position] + "\t" + text[position:]
    return text


@st.composite
def mixture(draw: st.DrawFn) -> str:
    """Several of the inputs above, joined: most bugs live at the seams."""
    parts = draw(st.lists(st.one_of(random_unicode, whitespace_only, awkward_text, nested_markdown(),
                                    broken_python(), st.just("")), max_size=4))
    return "".join(parts)


hostile_text = st.one_of(
    st.just(""), whitespace_only, random_unicode, awkward_text, huge_line(), nested_markdown(), broken_python(),
    mixture(),
)


# --- bytes ---------------------------------------------------------------------------------------

ENCODINGS = ["utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32", "shift_jis", "koi8-r",
             "gb18030"]


@st.composite
def mixed_encodings(draw: st.DrawFn) -> bytes:
    """Pieces of hostile text, each encoded in its own encoding (what survives it), concatenated."""
    pieces = draw(st.lists(st.tuples(hostile_text, st.sampled_from(ENCODINGS)), min_size=1, max_size=4))
    return b"".join(text.encode(encoding, errors="ignore") for text, encoding in pieces)


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    """A real file with random damage: flipped bytes, a cut, a spliced copy of itself, junk."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 8))):
        edit = draw(st.sampled_from(["flip", "truncate", "junk", "splice", "zero"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if edit == "flip" and data:
            data[position] = draw(st.integers(0, 255))
        elif edit == "truncate":
            del data[position:]
        elif edit == "junk":
            data[position:position] = draw(st.binary(min_size=1, max_size=64))
        elif edit == "splice":
            start = draw(st.integers(0, max(len(data) - 1, 0)))
            data[position:position] = data[start:start + draw(st.integers(1, 400))]
        else:
            data[position:position + draw(st.integers(1, 64))] = b"\x00" * 8
    return bytes(data)
