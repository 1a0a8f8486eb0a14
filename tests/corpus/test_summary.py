"""Corpus summary: written once per (corpus, method, model), read back without calling the model."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.corpus.summary import (
    corpus_summary,
    distinctive_words,
    heuristic_summary,
    summarise_corpus,
    summary_path,
)
from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from tests.factories import TINY_DOCS, scripted_llm_class

ScriptedLLM = scripted_llm_class()


def tiny_corpus(docs: dict[str, str] = TINY_DOCS) -> Corpus:
    documents = [make_document(doc_id, text, {"title": f"About {doc_id}"}) for doc_id, text in docs.items()]
    return Corpus.from_documents("tiny", documents)


def scripted(replies: list[Any], model: str = "scripted") -> tuple[LLMClient, Any]:
    """A client without a reply cache, so every call it records reached the scripted backend."""
    backend = ScriptedLLM(replies, model=model)
    return LLMClient(backend, None), backend


def reply(text: str) -> str:
    return json.dumps({"summary": text})


@pytest.mark.unit
def test_distinctive_words_match_a_hand_computed_case():
    # N = 2. "animals" in both documents once: 2 * ln2 * ln(1 + 2/2) = 2 (ln 2)^2 ~ 0.961;
    # "purr" twice in one: ln3 * ln3 ~ 1.207; "cats", "dogs" once in one: ln2 * ln3 ~ 0.761.
    texts = ["cats purr purr animals", "dogs animals"]
    assert distinctive_words(texts, 10) == ["purr", "animals", "cats", "dogs"]
    assert distinctive_words(texts, 2) == ["purr", "animals"]
    assert 2 * math.log(2) ** 2 > math.log(2) * math.log(3)  # why "animals" beats "cats"


@pytest.mark.unit
def test_heuristic_summary_lists_titles_and_words():
    text = heuristic_summary(tiny_corpus())
    assert text.startswith("3 documents in 'tiny'.")
    assert "Titles: About d1; About d2; About d3" in text
    assert "purr" in text and "bark" in text and "star" in text


@pytest.mark.unit
def test_heuristic_summary_is_written_once_and_read_back(tmp_path):
    corpus = tiny_corpus()
    first = corpus_summary(corpus, tmp_path, "heuristic")
    (path,) = tmp_path.iterdir()
    assert path == summary_path(tmp_path, corpus.corpus_id, "heuristic", None)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert (stored["corpus_id"], stored["method"], stored["model"], stored["text"]) == (
        corpus.corpus_id, "heuristic", None, first)
    stored["text"] = "edited by hand"  # proves the second call reads the file
    path.write_text(json.dumps(stored), encoding="utf-8")
    assert corpus_summary(corpus, tmp_path, "heuristic") == "edited by hand"


@pytest.mark.unit
def test_llm_summary_is_written_once_and_the_second_call_asks_nothing(tmp_path):
    corpus = tiny_corpus()
    client, backend = scripted([reply("Short notes on  cats, dogs and the sun.")])
    assert corpus_summary(corpus, tmp_path, "llm", client) == "Short notes on cats, dogs and the sun."
    assert len(client.records()) == 1 and client.records()[0].stage == "corpus:summary"
    prompt = backend.requests[0][-1]["content"]
    assert "- About d1: Cats are small furry animals" in prompt

    again, again_backend = scripted([reply("something else")])
    assert corpus_summary(corpus, tmp_path, "llm", again) == "Short notes on cats, dogs and the sun."
    assert again.records() == [] and again_backend.requests == []


@pytest.mark.unit
def test_the_key_is_corpus_method_and_model(tmp_path):
    corpus = tiny_corpus()
    other_corpus = tiny_corpus({"d9": "Volcanoes erupt lava and ash."})
    client, _ = scripted([reply("about pets")])
    corpus_summary(corpus, tmp_path, "llm", client)
    corpus_summary(corpus, tmp_path, "heuristic")
    corpus_summary(other_corpus, tmp_path, "heuristic")
    bigger, bigger_backend = scripted([reply("about pets, said a bigger model")], model="bigger")
    assert corpus_summary(corpus, tmp_path, "llm", bigger) == "about pets, said a bigger model"
    assert len(bigger_backend.requests) == 1
    assert len(list(tmp_path.iterdir())) == 4
    assert "Volcanoes" not in corpus_summary(corpus, tmp_path, "heuristic")


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["no json here", '{"summary": ""}', '{"topics": ["cats"]}'])
def test_an_unusable_reply_falls_back_to_the_heuristic_and_is_recorded(tmp_path, bad):
    corpus = tiny_corpus()
    client, _ = scripted([bad])
    summary = summarise_corpus(corpus, tmp_path, "llm", client)
    assert summary.fell_back and summary.error and summary.raw_reply == bad
    assert summary.text == heuristic_summary(corpus)
    stored = json.loads(next(tmp_path.iterdir()).read_text(encoding="utf-8"))
    assert stored["fell_back"] is True and stored["error"] == summary.error
    again, _ = scripted([reply("fine now")])  # the same reply would come back from the LLM cache
    assert summarise_corpus(corpus, tmp_path, "llm", again).fell_back and again.records() == []


@pytest.mark.unit
def test_a_failed_call_falls_back_without_caching(tmp_path):
    corpus = tiny_corpus()
    client, _ = scripted([LLMError("server gone")])
    summary = summarise_corpus(corpus, tmp_path, "llm", client)
    assert summary.fell_back and "server gone" in (summary.error or "")
    assert summary.text == heuristic_summary(corpus) and list(tmp_path.iterdir()) == []
    again, _ = scripted([reply("about pets")])
    assert corpus_summary(corpus, tmp_path, "llm", again) == "about pets"


@pytest.mark.unit
def test_an_unreadable_cache_file_is_written_again(tmp_path):
    corpus = tiny_corpus()
    path = summary_path(tmp_path, corpus.corpus_id, "heuristic", None)
    path.write_text("{half a fi", encoding="utf-8")
    assert corpus_summary(corpus, tmp_path, "heuristic") == heuristic_summary(corpus)
    assert json.loads(path.read_text(encoding="utf-8"))["text"] == heuristic_summary(corpus)


@pytest.mark.unit
def test_bad_arguments_fail_fast(tmp_path):
    with pytest.raises(ValueError, match="needs an LLM client"):
        corpus_summary(tiny_corpus(), tmp_path, "llm")
    with pytest.raises(ValueError, match="'heuristic' or 'llm'"):
        corpus_summary(tiny_corpus(), tmp_path, "magic")
