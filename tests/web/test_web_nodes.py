"""Web results as retrieved chunks: ids, metadata, scores and what the LLM sees."""

from __future__ import annotations

import hashlib

import pytest
from llama_index.core.schema import MetadataMode

from ragkit.web import WebResult, web_nodes

RESULTS = [
    WebResult("Why cats purr", "https://example.org/purr", "Cats purr when content."),
    WebResult("", "https://example.org/untitled", "Only a snippet."),
    WebResult("Why cats purr (copy)", "https://example.org/purr", "The same page again."),
    WebResult("", "https://example.org/empty", ""),
]


@pytest.mark.unit
def test_fields_of_each_node():
    nodes = web_nodes(RESULTS)
    assert [node.node.metadata["doc_id"] for node in nodes] == [
        "web:https://example.org/purr", "web:https://example.org/untitled", "web:https://example.org/empty"]
    first = nodes[0].node
    assert first.node_id == "web:" + hashlib.sha256(b"https://example.org/purr").hexdigest()[:16]
    assert first.get_content() == "Why cats purr\nCats purr when content."
    meta = first.metadata
    assert (meta["start_char"], meta["end_char"], meta["chunk_index"], meta["source"]) == (
        0, len(first.get_content()), 0, "web")
    assert (meta["url"], meta["title"]) == ("https://example.org/purr", "Why cats purr")
    assert (first.start_char_idx, first.end_char_idx) == (0, meta["end_char"])


@pytest.mark.unit
def test_duplicate_urls_are_dropped_and_ranks_count_the_kept():
    nodes = web_nodes(RESULTS)
    assert [node.node.metadata["chunk_index"] for node in nodes] == [0, 1, 2]
    assert [node.score for node in nodes] == pytest.approx([1.0, 0.5, 1 / 3])


@pytest.mark.unit
def test_text_falls_back_to_the_snippet_then_the_url():
    nodes = web_nodes(RESULTS)
    assert nodes[1].node.get_content() == "Only a snippet."
    assert nodes[2].node.get_content() == "https://example.org/empty"


@pytest.mark.unit
def test_the_llm_sees_title_and_url_but_not_the_bookkeeping():
    shown = web_nodes(RESULTS)[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "url: https://example.org/purr" in shown and "title: Why cats purr" in shown
    assert "chunk_index" not in shown and "doc_id" not in shown and "start_char" not in shown
    assert web_nodes(RESULTS)[0].node.get_content(metadata_mode=MetadataMode.EMBED) == (
        "Why cats purr\nCats purr when content.")


@pytest.mark.unit
def test_no_results_no_nodes():
    assert web_nodes([]) == []
