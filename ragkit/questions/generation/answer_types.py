"""Typed answers: numbers, dates and names in a text, and the type a question asks for.

Two users with one rule each way: an "unanswerable" question whose passage holds a phrase of
the asked type cannot be trusted to have no answer (``replies``), and a cloze question asks for
a number, date or name taken out of its sentence (``extractive``). English wording only: a
question in another language asks for no recognised type, so nothing is dropped for it.
"""

from __future__ import annotations

import re
from typing import Literal

from ragkit.text import CITATION

AnswerType = Literal["number", "date", "name"]
ANSWER_TYPES: tuple[AnswerType, ...] = ("number", "date", "name")

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
# Longest forms first, so "May 27, 2023" is one date and not "May 27" plus a year.
_DATE = re.compile(
    rf"(?<![\w-])(?:{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? (?:19|20)\d{{2}}|\d{{1,2}} {_MONTH},? (?:19|20)\d{{2}}"
    rf"|{_MONTH},? (?:19|20)\d{{2}}|{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?|(?:19|20)\d{{2}})(?![\w-])"
)
# A figure: digits with thousands separators or decimals, an optional unit word or percent sign;
# a bracketed figure is a negative amount in financial tables. Not part of a name ("COVID-19",
# "2019-nCoV", "SARS-CoV-2": no letter or hyphen either side).
_NUMBER = re.compile(
    r"(?<![\w.,-])\(?\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?(?:\s?(?:%|percent|million|billion|thousand))?(?![\w-])"
    r"|(?<![\w.,-])\$?\d+(?:\.\d+)?(?:\s?(?:%|percent|million|billion|thousand))?(?![\w-])"
)
# A person: two or three capitalised words after "by", "Dr" or "Professor", or before "et al",
# "said", "reported" (capitalised words alone are as often a journal or a table).
_NAME = re.compile(r"(?:(?<=\bby )|(?<=\bDr\. )|(?<=\bDr )|(?<=\bProfessor ))[A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,2}\b"
                   r"|\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,2}(?= (?:et al|said|says|reported|wrote)\b)")
# A figure right after these is a label or a reference, not a quantity: "Fig 2", "Table 3", "R 0".
_LABEL_BEFORE = re.compile(r"(?:\b(?:Fig|Figs|Figure|Figures|Table|Tables|Eq|Ref|Refs|No|Supplementary|S)\.?"
                           r"|\b[A-Z]{1,6})\s*$")
_IN_LIST = re.compile(r"\d\s*,\s*$")  # "5, 6, ..." lists of references or figures

_ASKS = {
    "date": re.compile(r"^\s*(?:when\b|(?:in |on |by )?(?:what|which) (?:year|date|month|day|time)\b)", re.I),
    "number": re.compile(
        r"^\s*(?:how (?:much|many|long|large|big|old|far|often|high|low)\b"
        r"|(?:what|which) (?:percentage|proportion|share|number|amount|fraction|rate|total|sum|value|figure)\b"
        r"|what (?:is|was|were|are) the (?:total|number|amount|percentage|proportion|rate|value|size|count|sum"
        r"|share|level)\b)", re.I),
    "name": re.compile(r"^\s*(?:who|whom|whose)\b", re.I),
}


def asked_type(question: str) -> AnswerType | None:
    """The answer type an English question asks for by its wording, or None (what, why, how)."""
    kinds: tuple[AnswerType, ...] = ("date", "number", "name")
    return next((kind for kind in kinds if _ASKS[kind].search(question)), None)


def typed_spans(text: str, kind: AnswerType, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Offsets of every phrase of the type in ``text[start:end]``. A year is a date, not a
    number; a number inside a date is not a number."""
    end = len(text) if end is None else end
    cited = [match.span() for match in CITATION.finditer(text, start, end)]
    # A bare figure in brackets is a reference marker ("(15)", "[5, 14]"), not a figure of the text.
    return [(s, e) for s, e in _typed(text, kind, start, end)
            if not any(cs <= s < ce for cs, ce in cited) and not (text[s - 1:s] in ("(", "[") and s > 0
                                                                  and text[e:e + 1] in (")", "]", ","))]


def _typed(text: str, kind: AnswerType, start: int, end: int) -> list[tuple[int, int]]:
    dates = [match.span() for match in _DATE.finditer(text, start, end)]
    if kind == "date":
        return dates
    if kind == "name":
        return [match.span() for match in _NAME.finditer(text, start, end)]
    return [(s, e) for s, e in (match.span() for match in _NUMBER.finditer(text, start, end))
            if not any(ds <= s and e <= de for ds, de in dates) and any(ch.isdigit() for ch in text[s:e])
            and not _LABEL_BEFORE.search(text, max(0, s - 14), s) and not _IN_LIST.search(text, max(0, s - 6), s)
            and not re.match(r"\s*,\s*\d", text[e:e + 6])]
