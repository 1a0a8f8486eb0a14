"""ragkit.text: every word, stopword, sentence and citation rule, against hand-made tables.

Each rule is pinned by what its components' cached results were computed with (see the module
docstring), so these tables are the rules as released, including their quirks ("Dr." ends a
sentence by rule; "top_k" is one BM25 term but two keywords)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ragkit.text import (
    BM25_STOPWORDS,
    FUNCTION_WORDS,
    KEYWORD_STOPWORDS,
    LANGUAGE_STOPWORDS,
    cited_numbers,
    content_words,
    keywords,
    letter_words,
    multilingual_content_words,
    rule_sentences,
    sentence_spans,
    strip_citations,
    terms,
    word_stem,
    words,
)

pytestmark = pytest.mark.unit

QUESTION = "What is top_k, and why do the 2 Cats purr?"


def test_each_tokeniser_on_one_question():
    assert words(QUESTION) == ["what", "is", "top", "k", "and", "why", "do", "the", "2", "cats", "purr"]
    assert keywords(QUESTION) == ["top", "k", "2", "cats", "purr"]
    assert terms(QUESTION) == ["top_k", "2", "cats", "purr"]
    assert content_words(QUESTION) == ["top", "cats", "purr"]
    assert multilingual_content_words(QUESTION) == ["top", "k", "2", "cats", "purr"]
    assert letter_words(QUESTION) == ["what", "is", "top", "k", "and", "why", "do", "the", "cats", "purr"]


@pytest.mark.parametrize(("text", "expected"), [
    ("The cats are purring, aren't they?", ["cats", "purring", "aren"]),
    ("COVID-19 vaccines in 2021", ["covid", "vaccines"]),
    ("a to of it is", []),
])
def test_content_words_drop_function_words_numbers_and_short_words(text, expected):
    assert content_words(text) == expected


def test_case_folding_differs_between_the_english_and_the_multilingual_rules():
    # lower() keeps "ß"; casefold() spells it "ss", so a German word matches either spelling.
    assert words("Straße") == ["straße"]
    assert multilingual_content_words("Straße und Weg") == ["strasse", "weg"]
    assert letter_words("Die STRASSE und der Weg") == ["die", "strasse", "und", "der", "weg"]


def test_the_english_stopword_sets_nest_and_no_language_lists_the_words_many_share():
    assert BM25_STOPWORDS < KEYWORD_STOPWORDS < FUNCTION_WORDS
    assert {"can", "will", "would", "you"} <= KEYWORD_STOPWORDS - BM25_STOPWORDS
    assert not {"a", "de", "en", "in"} & frozenset().union(*LANGUAGE_STOPWORDS.values())


@pytest.mark.parametrize(("word", "stem"), [
    ("vaccines", "vaccine"), ("cats", "cat"), ("virus", "virus"), ("glass", "glass"), ("analysis", "analysis"),
    ("gas", "gas"), ("purr", "purr"),
])
def test_word_stem_folds_plurals_only(word, stem):
    assert word_stem(word) == stem


@pytest.mark.parametrize(("text", "sentences"), [
    ("Cats purr.  Dogs\nbark!", ["Cats purr.", "Dogs bark!"]),
    ("Version 2.5 is out. 3 features. (Really) no.", ["Version 2.5 is out.", "3 features.", "(Really) no."]),
    ("See e.g. the cat. Dr. Smith agrees.", ["See e.g. the cat.", "Dr.", "Smith agrees."]),
    ("It ends. élan follows.", ["It ends. élan follows."]),
    ("", [""]),
])
def test_rule_sentences_end_at_punctuation_before_a_capital_digit_or_opening_mark(text, sentences):
    assert rule_sentences(text) == sentences


def test_sentence_spans_are_offsets_that_also_end_at_line_breaks_and_before_accented_letters():
    text = "# Title\nCats purr. Élan follows. e.g. this  \n\n- item"
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == ["# Title", "Cats purr.", "Élan follows. e.g. this", "- item"]
    assert spans[1] == (8, 18)
    # within a window, offsets still point into the whole text
    assert sentence_spans(text, 8, 30) == [(8, 18), (19, 30)]


@pytest.mark.parametrize(("text", "numbers"), [
    ("a [1] b [2,3] c [ 4 ] d [1] e [x] f [10]", [1, 2, 3, 10]),
    ("ranges [1-3] are not read", []),
    ("[2, 1] [1 ,  5]", [2, 1, 5]),
])
def test_cited_numbers_in_order_each_once(text, numbers):
    assert cited_numbers(text) == numbers


@pytest.mark.parametrize(("text", "plain", "without_ranges"), [
    ("Cats purr [1]. Dogs bark [2, 3].", "Cats purr. Dogs bark.", "Cats purr. Dogs bark."),
    ("Both [1-3] and [4] go.", "Both [1-3] and go.", "Both and go."),
    ("Not a marker: [a] [ 1].", "Not a marker: [a] [ 1].", "Not a marker: [a] [ 1]."),
])
def test_strip_citations_removes_markers_and_the_space_before_them(text, plain, without_ranges):
    assert strip_citations(text) == plain
    assert strip_citations(text, ranges=True) == without_ranges


# What a restated rule looks like in source: a citation pattern, a sentence-end rule, a word
# tokeniser or a stopword set defined outside ragkit/text.py.
RESTATED = {
    "citation pattern": re.compile(r"\\\[\(?\\d"),
    "sentence-end rule": re.compile(r"\(\?<=\[\.!\?\]\)"),
    "word tokeniser": re.compile(r"""r["'](?:\[\^\\W(?:\\d)?_\]\+|\\w\+)["']"""),
    "stopword set": re.compile(r"^\s*_?[A-Z_]*(?:STOPWORDS|FUNCTION_WORDS)\s*(?::[^=]*)?=", re.MULTILINE),
}


def test_no_module_but_ragkit_text_defines_a_text_rule():
    root = Path(__file__).resolve().parents[1]
    found = [
        f"{path.relative_to(root)}: {kind}"
        for folder in ("ragkit", "dashboard")
        for path in sorted((root / folder).rglob("*.py"))
        if path != root / "ragkit" / "text.py"
        for kind, pattern in RESTATED.items()
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(("source", "kind"), [
    ('_CITATION = re.compile(r"\\[(\\d+(?:\\s*,\\s*\\d+)*)\\]")', "citation pattern"),
    ('_CITATION = re.compile(r"\\s*\\[\\d+(?:\\s*[,-]\\s*\\d+)*\\]")', "citation pattern"),
    ('_END = re.compile(r"(?<=[.!?])\\s+(?=[A-Z])")', "sentence-end rule"),
    ('_WORD = re.compile(r"[^\\W_]+")', "word tokeniser"),
    ('_WORD = re.compile(r"[^\\W\\d_]+")', "word tokeniser"),
    ('_TOKEN = re.compile(r"\\w+")', "word tokeniser"),
    ("STOPWORDS = frozenset(", "stopword set"),
    ("    _ALL_STOPWORDS: frozenset[str] = frozenset()", "stopword set"),
])
def test_the_restated_rule_check_sees_each_kind_of_copy(source, kind):
    assert RESTATED[kind].search(source)


def test_ragkit_text_imports_nothing_of_ragkit():
    """Components of every layer cut text with it, so it sits at the bottom like ragkit.errors."""
    tree = ast.parse((Path(__file__).resolve().parents[1] / "ragkit" / "text.py").read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imported and not [name for name in imported if name.split(".")[0] == "ragkit"]
