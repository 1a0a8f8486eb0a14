"""Words, stopwords, sentences and citation markers: the one place ragkit cuts text.

Every component that splits text into words or sentences, drops stopwords or reads ``[1]``
citation markers takes the rule from here. Where components cut differently, each variant is
named here with the reason it differs, rather than a copy living in the component.

A variant is not merged into another lightly: what a component's cut produced is part of its
cached results, and a run id hashes the component's parameters and ``version``, not this code.
A change to a rule a component uses means bumping that component's ``version`` (which changes
its run ids, so recomputes its results).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# ---------------------------------------------------------------------------------------------
# Words

# Letters and digits; punctuation and the underscore split words ("top_k" is "top", "k").
WORD = re.compile(r"[^\W_]+")
# Letters only: a language is told by its words, not by its numbers.
_LETTERS = re.compile(r"[^\W\d_]+")
# Python's \w: letters, digits and the underscore, so an identifier stays one term.
_TERM = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Every word of ``text``, lower-cased, in order (letters and digits; punctuation splits)."""
    return WORD.findall(text.lower())


# Whitespace-separated tokens: what a chunk's size "in words" counts ("top_k=5," is one word).
_WHITESPACE_WORD = re.compile(r"\S+")


def word_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each whitespace-separated word of ``text[start:end]``, in order: the
    unit word-window chunkers count and cut at, so every window is an exact slice."""
    return [match.span() for match in _WHITESPACE_WORD.finditer(text, start, len(text) if end is None else end)]


def letter_words(text: str) -> list[str]:
    """The runs of letters of ``text``, case-folded, in order (digits and punctuation split)."""
    return [word.casefold() for word in _LETTERS.findall(text)]


# An identifier-like token: a word with a letter and a digit, an inner capital, an underscore or
# hyphen joining words, or an acronym ("IL-6", "ACE2", "H1N1", "top_k", "BCoV", "WHO"). The
# strategy judge reads one in a query as a lexical lookup; the document profiler counts them as
# technical density. Pinned with the strategy judge's cached decisions.
CODE_LIKE = re.compile(r"\b(?=\w*[A-Za-z])(?:\w*\d\w*|\w+[-_]\w+|\w*[a-z][A-Z]\w*|[A-Z]{2,}\d*)\b")


def word_stem(word: str) -> str:
    """A plural folded onto its singular ("vaccines" -> "vaccine"), enough to match a question's
    words against a text's without a stemmer."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# ---------------------------------------------------------------------------------------------
# Stopwords: one set per use, each pinned by its users' cached results; they nest
# (BM25_STOPWORDS within KEYWORD_STOPWORDS within FUNCTION_WORDS), and the differences are kept
# because the judges that use the smaller sets are in the pinned grid of run ids
# (tests/experiments/test_ids_stable.py), so their cached decisions must stay what they were.

# English function words, which carry no topic: left out of a corpus' vocabulary (corpus
# summary) and of a question's when the router compares the two.
FUNCTION_WORDS = frozenset(
    "a about above after again against all also am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each either etc few for from further had has "
    "have having he her here hers him his how however i if in into is it its itself just me may might more most "
    "much must my no nor not now of off on once one only or other our ours out over own per same she should so "
    "some such than that the their theirs them then there these they this those through thus to too under until "
    "up upon us use used using very via was we were what when where whether which while who whom whose why will "
    "with within without would yet you your yours".split()
)

# Question words and the commonest function words: what the judges' keyword rules (quality gate
# reformulation, question overlap, query expansion in condense and correction) leave out.
KEYWORD_STOPWORDS = frozenset(
    "a an and are as at be by can did do does for from had has have how i in is it its of on or that the "
    "their there these this to was were what when where which who whom whose why will with would you".split()
)

# The rerank judge's heuristic (BM25 over the retrieved chunks) drops fewer words.
BM25_STOPWORDS = frozenset(
    "a an and are as at be by do does for from how in is it of on or that the this to was what when where which "
    "who why with".split()
)

# The most frequent function words per language (ragkit.questions.language guesses a language from them).
# Words common to many of these languages ("a", "de", "en", "in") are left out, so a hit is mostly
# evidence for one language; a few shared by two remain ("was", "que", "por") and count for both.
LANGUAGE_STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and of to is are was were that this with for what which who how why when where does "
                    "did has have from by be it its they their than or not".split()),
    "de": frozenset("der die das und ist sind nicht mit von zu den dem ein eine einer auf für wie was wer "
                    "warum welche wird werden auch sich bei oder aus".split()),
    "fr": frozenset("le la les et est sont une des du au aux pour dans qui que quoi quel quelle comment "
                    "pourquoi pas avec sur par ce cette ces ou".split()),
    "es": frozenset("el los las y es son del una por para con qué cuál cómo quién porque pero como sobre "
                    "este esta su sus al".split()),
    "it": frozenset("il lo gli della delle è sono che di per con una uno come perché quale quali chi cosa "
                    "nel nella sul questo questa".split()),
    "nl": frozenset("het een van is zijn niet met voor dat wat wie hoe waarom welke wordt worden ook op "
                    "bij deze aan".split()),
    "pt": frozenset("o os as é são do da dos das um uma para com não que qual quais como quem por porque "
                    "no na pelo pela".split()),
}
_ANY_LANGUAGE_STOPWORDS = frozenset().union(*LANGUAGE_STOPWORDS.values())


def content_words(text: str) -> list[str]:
    """The topic-bearing words of ``text``, lower-cased, in order: no function words, no numbers,
    nothing shorter than three characters."""
    return [word for word in words(text) if len(word) > 2 and not word.isdigit() and word not in FUNCTION_WORDS]


def keywords(text: str) -> list[str]:
    """The words of ``text`` without KEYWORD_STOPWORDS, lower-cased, in order."""
    return [word for word in words(text) if word not in KEYWORD_STOPWORDS]


def with_new_keywords(text: str, sources: list[str], exclude: frozenset[str] = frozenset(),
                      min_length: int = 1) -> str:
    """``text`` (whitespace collapsed) followed by the keywords of ``sources`` it lacks, each once,
    in order of appearance; words in ``exclude`` or shorter than ``min_length`` are left out."""
    present = set(keywords(text)) | exclude
    extra: list[str] = []
    for source in sources:
        for word in keywords(source):
            if word not in present and len(word) >= min_length:
                present.add(word)
                extra.append(word)
    return " ".join([" ".join(text.split()), *extra])


def terms(text: str) -> list[str]:
    """BM25 terms: \\w runs (an identifier stays whole), lower-cased, without BM25_STOPWORDS."""
    return [term for term in _TERM.findall(text.lower()) if term not in BM25_STOPWORDS]


def multilingual_content_words(text: str) -> list[str]:
    """Case-folded words without the stopwords of any language in LANGUAGE_STOPWORDS: question
    sets are written in several languages, and a copied question is copied in any of them."""
    return [word for word in (w.casefold() for w in WORD.findall(text)) if word not in _ANY_LANGUAGE_STOPWORDS]


# ---------------------------------------------------------------------------------------------
# Sentences. Three splitters, for three needs: a rule on one-line answers (the groundedness
# judge's claims, pinned like the stopwords above), a rule giving offsets into a document (the
# passages question generation cuts; also at line breaks and before accented letters), and
# NLTK's trained Punkt model where quality matters more than speed (embedding groundedness).

_ANSWER_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
# Ends at . ! or ? followed by space and an upper-case letter, digit or opening mark, or at a
# line break (headings, list items); never inside "e.g. the".
_DOCUMENT_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+(?=[\"'(\[]?[A-Z0-9\u00C0-\u024F])|[ \t]*\n\s*")


def rule_sentences(text: str) -> list[str]:
    """Sentences of ``text`` with whitespace collapsed: one ends at . ! or ? followed by space and an
    upper-case ASCII letter, a digit or an opening mark. Needs no model; "Dr. Smith" splits."""
    return [part.strip() for part in _ANSWER_SENTENCE_END.split(" ".join(text.split()))]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text[start:end]``, offsets into ``text``, whitespace trimmed."""
    end = len(text) if end is None else end
    spans = []
    cursor = start
    for match in _DOCUMENT_SENTENCE_END.finditer(text, start, end):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, end))
    trimmed = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


@lru_cache(maxsize=1)
def _punkt() -> Any:
    from llama_index.core.utils import globals_helper
    from nltk.tokenize import PunktTokenizer

    # Puts LlamaIndex's bundled NLTK data (which holds the trained punkt_tab) on nltk's path.
    # LlamaIndex's own default is an untrained Punkt, which splits after every "Dr." and "e.g.".
    globals_helper.wait_for_nltk_check()
    return PunktTokenizer("english")


def punkt_sentences(text: str, min_words: int) -> list[str]:
    """Sentences of ``text`` by LlamaIndex's sentence splitting over NLTK's trained English Punkt
    model, whitespace-normalised; fragments under ``min_words`` words ("Fig.", "et al.") are joined
    to the next sentence (the last one to the previous). No text is dropped: a text of fewer than
    ``min_words`` words is one short sentence."""
    from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer_internal

    if min_words < 1:
        raise ValueError(f"min_words must be >= 1, got {min_words}")
    pieces = [" ".join(piece.split()) for piece in split_by_sentence_tokenizer_internal(text, _punkt())]
    sentences: list[str] = []
    pending = ""
    for piece in filter(None, pieces):
        pending = f"{pending} {piece}".strip()
        if len(pending.split()) >= min_words:
            sentences.append(pending)
            pending = ""
    if pending and sentences:
        sentences[-1] = f"{sentences[-1]} {pending}"
    elif pending:
        sentences.append(pending)
    return sentences


# ---------------------------------------------------------------------------------------------
# Citation markers: "[1]" or "[1, 2]", the form the generator asks for.

_NUMBERS = r"\d+(?:\s*,\s*\d+)*"
CITATION = re.compile(rf"\[({_NUMBERS})\]")
_CITATION_WITH_SPACE = re.compile(rf"\s*\[{_NUMBERS}\]")
# Also "[1-3]": embedding groundedness removes ranges too; the groundedness judge never did, and
# keeps its pinned rule.
_CITATION_OR_RANGE_WITH_SPACE = re.compile(r"\s*\[\d+(?:\s*[,-]\s*\d+)*\]")


def cited_numbers(text: str) -> list[int]:
    """Numbers in ``[1]`` or ``[1, 2]`` markers, in order, each once."""
    numbers: list[int] = []
    for match in CITATION.finditer(text):
        for part in match.group(1).split(","):
            number = int(part)
            if number not in numbers:
                numbers.append(number)
    return numbers


def strip_citations(text: str, ranges: bool = False) -> str:
    """``text`` without its citation markers and the whitespace before each; with ``ranges``,
    "[1-3]" markers go too."""
    return (_CITATION_OR_RANGE_WITH_SPACE if ranges else _CITATION_WITH_SPACE).sub("", text)
