"""Locating reference contexts as text: what two PDF parsers differ in is tolerated, the passage's
offsets are the document's own, and unrelated or shuffled text is not located."""

from __future__ import annotations

import json
import random

import pytest

from ragkit.questions.passages import BELOW_SHARE, MIN_SHARE, NOT_IN_CORPUS, TOO_SHORT, PassageLocator, text_words
from tests.conftest import SAMPLE_DATASET, require_shared_dataset

pytestmark = pytest.mark.unit

# ragkit's text of a page (PDFium: a line-end hyphen kept inside the word, ligatures expanded)...
DOCUMENT = (
    "Journal of Tests \u00b7 page 3\n"
    "The molecu-les on the cell membrane needed for HBV infection\n"
    "can be divided into two classes: low affinity and high\n"
    "affinity molecules. The \"first\" receptor \u2013 NTCP \u2013 was identified in 2012.\n"
    "Article 1552 \u00b7 page 3\n"
    "Other text follows here, about something else entirely."
)
# ...and another parser's context of the same lines: a line break after the hyphen, ligature
# glyphs, curly quotes, a hyphen for the en dash, other spacing, no running header or footer.
CONTEXT = (
    "The molecu-\nles on the cell  membrane needed for HBV infection can be divided into two "
    "classes: low a\ufb03nity and high\na\ufb03nity molecules. The \u201cfirst\u201d receptor - NTCP - "
    "was identi\ufb01ed in 2012."
)


def test_words_are_normalised_and_keep_their_place():
    words = text_words("The e\ufb03cacy of infec-\ntion, \u201cFULL\u201d")
    assert words.tokens == ["the", "efficacy", "of", "infection", "full"]
    assert [(words.starts[i], words.ends[i]) for i in (1, 3)] == [(4, 10), (14, 25)]


def test_a_context_from_another_parser_is_located_at_the_documents_own_offsets():
    match = PassageLocator({"other": "Nothing here about membranes.", "d": DOCUMENT}).locate(CONTEXT)
    assert match.passage is not None and match.reason is None
    passage = match.passage
    assert passage.doc_id == "d" and passage.score == 1.0
    # checked by hand: from "The molecu-les" to "2012" in ragkit's text
    assert DOCUMENT[passage.start:passage.end].startswith("The molecu-les on the cell membrane")
    assert DOCUMENT[passage.start:passage.end].endswith("was identified in 2012")
    assert passage.start == DOCUMENT.index("The molecu")


def test_an_exact_context_is_found_verbatim_first_in_the_named_document():
    text = "Masks reduce the spread of respiratory viruses in crowded rooms."
    locator = PassageLocator({"a": text, "b": text})
    assert locator.locate(text[6:40]).passage.doc_id == "a"
    named = locator.locate(text[6:40], doc_id="b").passage
    assert (named.doc_id, named.start, named.end, named.score) == ("b", 6, 40, 1.0)
    fuzzy = locator.locate("MASKS reduce the spread of respiratory  viruses", doc_id="b").passage
    assert (fuzzy.doc_id, fuzzy.start) == ("b", 0)


def test_a_context_with_words_missing_scores_its_share_in_order():
    words = DOCUMENT.split("\n")[1].split()  # 10 words of the document
    dropped = " ".join(words[:4] + words[6:])  # 8 of 10... the context's own words are all found
    match = PassageLocator({"d": DOCUMENT}).locate(dropped)
    assert match.passage is not None and match.score == 1.0
    changed = " ".join([*words[:5], "zebra", "quagga", *words[7:]])  # 8 of its 10 words in order
    assert PassageLocator({"d": DOCUMENT}).locate(changed).score == pytest.approx(0.8)


def test_unrelated_shuffled_and_short_contexts_are_not_located():
    locator = PassageLocator({"d": DOCUMENT})
    shuffled = CONTEXT.split()
    random.Random(3).shuffle(shuffled)
    outcome = locator.locate(" ".join(shuffled))
    assert outcome.passage is None and outcome.score < MIN_SHARE
    assert outcome.reason in (BELOW_SHARE, NOT_IN_CORPUS)
    assert locator.locate("HBV infection").reason == TOO_SHORT
    assert locator.locate("Bananas grow on large herbaceous flowering plants.").reason == NOT_IN_CORPUS


def test_no_scifact_abstract_and_no_shuffled_context_is_located_in_covid_articles():
    """Another corpus's abstracts share the function words and the field's vocabulary, and a
    shuffled context all its words: none reaches the threshold, and the best stays far below it."""
    scifact = require_shared_dataset("scifact") / "beir" / "corpus.jsonl"
    abstracts = [json.loads(line)["text"] for line, _ in zip(scifact.open(encoding="utf-8"), range(40))]
    articles = {row["_id"]: row["text"] for row in map(json.loads, (SAMPLE_DATASET / "corpus.jsonl").open())}
    rng = random.Random(0)
    shuffled = []
    for text in list(articles.values())[:8]:
        words = text[2000:3000].split()
        rng.shuffle(words)
        shuffled.append(" ".join(words))
    outcomes = PassageLocator(articles).locate_all([(text, None) for text in abstracts + shuffled])
    assert not [outcome for outcome in outcomes if outcome.passage is not None]
    assert max(outcome.score for outcome in outcomes) < 0.5
    # the same passages unshuffled are found, each where it was taken from
    found = PassageLocator(articles).locate_all([(text[2000:3000], None) for text in list(articles.values())[:8]])
    assert [(o.passage.doc_id, o.passage.start) for o in found] == [(doc, 2000) for doc in list(articles)[:8]]
