"""Equal-budget metrics: the cut rule by hand (a whitespace tokenizer you can count), then cl100k."""

from __future__ import annotations

import re

import pytest

from ragkit.metrics.budget import budget_cut, budget_metrics
from ragkit.metrics.final_context import FinalContext

pytestmark = pytest.mark.unit


def words(text: str) -> list[str]:
    """The fake tokenizer: a token is a word with the whitespace after it."""
    return re.findall(r"\S+\s*", text)


def whitespace_context(*chunks: tuple[str, int, str]) -> FinalContext:
    """Chunks (doc_id, start, text), each spanning len(text) characters from start."""
    texts = [text for _, _, text in chunks]
    return FinalContext(
        chunks=[(doc_id, start, start + len(text)) for doc_id, start, text in chunks],
        tokens=[len(words(text)) for text in texts],
        prefix_chars=lambda index, n: len("".join(words(texts[index])[:n])),
    )


def cut(context: FinalContext, budget: int) -> list[tuple[str, int, int]]:
    return budget_cut(context.chunks, context.tokens, budget, context.prefix_chars)


THREE = "aa bb cc"  # 3 tokens, 8 characters
FOUR = "dd ee ff gg"  # 4 tokens, 11 characters; its first 2 tokens are "dd ee " = 6 characters


@pytest.mark.parametrize(
    ("chunks", "budget", "expected"),
    [
        # whole chunks while they fit: 3 + 4 = 7 tokens
        ([("a", 0, THREE), ("b", 100, FOUR)], 7, [("a", 0, 8), ("b", 100, 111)]),
        ([("a", 0, THREE), ("b", 100, FOUR)], 50, [("a", 0, 8), ("b", 100, 111)]),  # shorter than the budget
        # the chunk that crosses the budget keeps the characters of its first `remaining` tokens
        ([("a", 0, THREE), ("b", 100, FOUR)], 5, [("a", 0, 8), ("b", 100, 106)]),
        ([("a", 0, THREE), ("b", 100, FOUR)], 4, [("a", 0, 8), ("b", 100, 103)]),
        ([("b", 100, FOUR)], 1, [("b", 100, 103)]),  # even the first chunk
        ([("b", 100, FOUR)], 3, [("b", 100, 109)]),
        # after the crossing chunk nothing counts, not even a chunk that would fit
        ([("a", 0, THREE), ("b", 100, FOUR), ("c", 0, "hh")], 5, [("a", 0, 8), ("b", 100, 106)]),
        # a budget used up exactly leaves the next chunk with 0 tokens: it is out
        ([("a", 0, THREE), ("c", 0, "hh")], 3, [("a", 0, 8)]),
        # a chunk of 0 tokens contributes nothing and is out
        ([("z", 0, ""), ("a", 0, THREE)], 3, [("a", 0, 8)]),
        ([], 256, []),
    ],
)
def test_budget_cut(chunks, budget, expected) -> None:
    assert cut(whitespace_context(*chunks), budget) == expected


def test_a_crossing_chunk_whose_tokens_hold_no_whole_character_is_out() -> None:
    context = FinalContext([("a", 0, 3), ("b", 0, 4)], [3, 4], lambda index, n: 0)
    assert budget_cut(context.chunks, context.tokens, 5, context.prefix_chars) == [("a", 0, 3)]


def test_budget_must_be_positive_and_counts_must_match() -> None:
    context = whitespace_context(("a", 0, THREE))
    with pytest.raises(ValueError, match="budget must be >= 1 token, got 0"):
        cut(context, 0)
    with pytest.raises(ValueError, match="1 chunks but 2 token counts"):
        FinalContext([("a", 0, 8)], [3, 4], context.prefix_chars)


# doc a: "w0 w1 ... w9 ", 3 characters per word; the answer is word w5, characters [15, 18).
TEN_WORDS = "".join(f"w{i} " for i in range(10))
ANSWER = [[("a", 15, 18)]]


@pytest.mark.parametrize(
    ("chunks", "budget", "recall", "span_recall"),
    [
        ([("a", 0, TEN_WORDS)], 5, 1.0, 0.0),  # the first 5 words end at 15: the answer is cut off
        ([("a", 0, TEN_WORDS)], 6, 1.0, 1.0),
        ([("x", 0, "x1 x2 x3"), ("a", 0, TEN_WORDS)], 3, 0.0, 0.0),  # a contributes 0 tokens
        ([("x", 0, "x1 x2 x3"), ("a", 0, TEN_WORDS)], 4, 1.0, 0.0),  # one token of a: a counts, w5 does not
        ([("x", 0, "x1 x2 x3"), ("a", 0, TEN_WORDS)], 9, 1.0, 1.0),
    ],
)
def test_budget_metrics_by_hand(chunks, budget, recall, span_recall) -> None:
    scores = budget_metrics(whitespace_context(*chunks), {"a": 1.0, "b": 1.0}, ANSWER, budgets=[budget])
    assert scores == {f"recall@{budget}tok": recall / 2, f"span_recall@{budget}tok": span_recall}


def test_budget_metrics_leave_out_levels_without_ground_truth() -> None:
    context = whitespace_context(("a", 0, TEN_WORDS))
    assert set(budget_metrics(context, {"a": 1.0}, [[]])) == {f"recall@{n}tok" for n in (256, 512, 1024, 2048)}
    assert set(budget_metrics(context, None, ANSWER)) == {f"span_recall@{n}tok" for n in (256, 512, 1024, 2048)}
    assert budget_metrics(context, None, None) == {}


def test_cl100k_counts_and_cuts_like_the_token_chunker() -> None:
    """cl100k reads "hello world" as "hello" + " world"; the cut keeps "hello" (5 characters)."""
    from ragkit.chunkers.token import cl100k_tokenizer

    texts = ["hello world", "hello world hello world"]
    context = FinalContext.from_texts([("a", 10, 21), ("b", 0, 23)], texts)
    assert list(context.tokens) == [len(cl100k_tokenizer()(text)) for text in texts] == [2, 4]
    assert context.prefix_chars(0, 1) == len("hello")
    assert context.prefix_chars(1, 3) == len("hello world hello")
    assert budget_cut(context.chunks, context.tokens, 3, context.prefix_chars) == [("a", 10, 21), ("b", 0, 5)]
    assert budget_cut(context.chunks, context.tokens, 6, context.prefix_chars) == [("a", 10, 21), ("b", 0, 23)]


def test_cl100k_never_cuts_inside_a_character() -> None:
    """A token boundary can fall inside a multi-byte character: the first n tokens then hold the
    characters whose bytes all lie in them, and no more."""
    from ragkit.chunkers.token import cl100k_encoding, cl100k_tokenizer

    text = "🦜🦜 données d'évaluation 🦜"
    ids = cl100k_tokenizer()(text)
    context = FinalContext.from_texts([("a", 0, len(text))], [text])
    split_inside_a_character = False
    for n in range(len(ids) + 1):
        chars = context.prefix_chars(0, n)
        held = len(cl100k_encoding().decode_bytes(ids[:n]))
        assert len(text[:chars].encode()) <= held
        if chars < len(text):
            assert len(text[: chars + 1].encode()) > held
        split_inside_a_character |= len(text[:chars].encode()) < held
    assert split_inside_a_character  # the case is really exercised
    assert context.prefix_chars(0, len(ids)) == len(text)
