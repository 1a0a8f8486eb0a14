"""Document profiles: the heuristic rules as hand-computed tables, the corpus' aggregates, the
llm method's replies (used, unusable, failed) and the file written once per corpus and method."""

from __future__ import annotations

import json
import math

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.corpus.profile import (
    CorpusProfile,
    DocumentProfile,
    corpus_profile,
    document_type,
    domain_tags,
    heuristic_profiles,
    technical_density,
)
from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from tests.factories import TINY_DOCS, scripted_llm_class

ScriptedLLM = scripted_llm_class()


def tiny_corpus() -> Corpus:
    return Corpus.from_documents("tiny", [make_document(doc_id, text, {"title": f"About {doc_id}"})
                                          for doc_id, text in TINY_DOCS.items()])


@pytest.mark.unit
@pytest.mark.parametrize(("text", "metadata", "expected"), [
    ("def f(x):\n    return x", {"file_type": "py"}, "code"),
    ("anything", {"language": "python"}, "code"),
    ("a,b\n1,2", {"file_type": "csv"}, "table"),
    ("Abstract: we sequenced it. DOI: 10.1/x", {}, "academic"),
    ("Abstract: one marker only, a plain note.", {}, "general"),
    ("Abstract and References in a markdown file", {"file_type": "md"}, "academic"),  # academic comes first
    ("# Setup\ntext\n## Install\ntext\n## Use\ntext", {}, "documentation"),  # three headings
    ("# Setup\ntext\n## Install\ntext", {}, "general"),  # two are not enough
    ("plain words", {"file_type": "md"}, "documentation"),
    ("The cat sat on the mat.", {}, "general"),
])
def test_document_type_rules(text, metadata, expected):
    assert document_type(text, metadata) == expected


@pytest.mark.unit
@pytest.mark.parametrize(("text", "expected"), [
    ("The IL-6 level rose in most of the ten patients today", round(4 * 1 / 11, 4)),  # 1 identifier, 11 tokens
    ("ACE2 and IL-6 rise", 1.0),  # 2 of 4 tokens: 4 * 0.5 = 2, capped at 1
    ("The cat sat on the mat.", 0.0),
    ("2017 was a year", 0.0),  # a number alone is not an identifier
    ("", 0.0),
])
def test_technical_density(text, expected):
    assert technical_density(text) == expected


@pytest.mark.unit
def test_domain_tags_weigh_words_as_the_corpus_summary_does():
    # N = 2. Document 1: purr 2x in one document: ln3 * ln3 ~ 1.207; cats: ln2 * ln3 ~ 0.761;
    # animals (in both): ln2 * ln2 ~ 0.480. Document 2: dogs ~ 0.761, animals ~ 0.480.
    assert domain_tags(["cats purr purr animals", "dogs animals"], 2) == [("purr", "cats"), ("dogs", "animals")]
    assert math.log(3) ** 2 > math.log(2) * math.log(3) > math.log(2) ** 2


def profile(doc_id: str, kind: str, density: float, tags: tuple[str, ...], valid: bool = True) -> DocumentProfile:
    return DocumentProfile(doc_id, kind, density, tags, valid)  # type: ignore[arg-type]


@pytest.mark.unit
def test_the_corpus_profile_aggregates_its_documents():
    corpus = CorpusProfile("c", "heuristic", None, (
        profile("a", "academic", 0.4, ("genome", "virus")), profile("b", "general", 0.1, ("virus",)),
        profile("c", "academic", 0.1, ("cattle", "genome"), valid=False), profile("d", "code", 0.6, ("api",)),
    ))
    assert corpus.types() == {"academic": 2, "general": 1, "code": 1}  # ties in DOCUMENT_TYPES order
    assert corpus.dominant_type() == "academic"
    assert corpus.technical_density() == 0.3  # (0.4 + 0.1 + 0.1 + 0.6) / 4
    assert corpus.domain_tags() == ["genome", "virus", "api", "cattle"]  # 2, 2, then 1s alphabetically
    assert corpus.invalid() == 1
    empty = CorpusProfile("e", "heuristic", None)
    assert (empty.dominant_type(), empty.technical_density(), empty.domain_tags()) == (None, 0.0, [])


@pytest.mark.unit
def test_heuristic_profiles_are_written_once_and_read_back(tmp_path):
    corpus = tiny_corpus()
    first = corpus_profile(corpus, tmp_path, "heuristic")
    assert [item.doc_id for item in first.documents] == ["d1", "d2", "d3"]
    assert first.documents == tuple(heuristic_profiles(list(corpus.documents)))
    (written,) = tmp_path.iterdir()
    entry = json.loads(written.read_text())
    entry["documents"][0]["type"] = "code"  # what the file says is what is read back
    written.write_text(json.dumps(entry))
    assert corpus_profile(corpus, tmp_path, "heuristic").documents[0].type == "code"
    written.write_text("{not json")  # unreadable: written again
    assert corpus_profile(corpus, tmp_path, "heuristic") == first


@pytest.mark.unit
def test_llm_profiles_use_good_replies_keep_the_rule_for_bad_ones_and_do_not_cache_a_failed_call(tmp_path):
    corpus = tiny_corpus()
    good = json.dumps({"type": "general", "technical_density": 0.2, "domain_tags": ["Cats ", "cats", "fish"]})
    backend = ScriptedLLM([good, "a document about dogs", LLMError("timed out")])
    client = LLMClient(backend, None)  # no reply cache: every call reaches the backend
    result = corpus_profile(corpus, tmp_path, "llm", client)
    rules = heuristic_profiles(list(corpus.documents))
    assert result.documents[0] == DocumentProfile("d1", "general", 0.2, ("cats", "fish"))
    assert result.documents[1].valid is False and result.documents[1].error
    assert result.documents[1].type == rules[1].type and result.documents[1].domain_tags == rules[1].domain_tags
    assert result.documents[2].valid is False and result.documents[2].error == "timed out"
    assert result.invalid() == 2 and result.model == "scripted:scripted"
    assert "Title: About d1" in backend.requests[0][-1]["content"]
    assert list(tmp_path.iterdir()) == []  # a failed call: the next run asks again
    corpus_profile(corpus, tmp_path, "llm", client)
    assert len(backend.requests) == 6


@pytest.mark.unit
def test_an_llm_profile_needs_a_client_and_a_known_method(tmp_path):
    with pytest.raises(ValueError, match="needs an LLM client"):
        corpus_profile(tiny_corpus(), tmp_path, "llm")
    with pytest.raises(ValueError, match="must be 'heuristic' or 'llm'"):
        corpus_profile(tiny_corpus(), tmp_path, "rules")  # type: ignore[arg-type]
