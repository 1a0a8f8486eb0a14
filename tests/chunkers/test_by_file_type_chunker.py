"""The dispatching chunker: hand-computed cuts of a markdown, a Python and a text file, the
related ids stored at chunking time, summaries and contextualised embeddings on every type."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from ragkit.artefacts.chunksets import chunk_frame
from ragkit.chunkers import chunkers
from ragkit.chunkers.by_file_type import file_kind, word_windows
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.stages.chunking.stage import judge_choosable_chunkers
from tests.chunkers.test_chunker_contract import PYTHON, ChunkerContract
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.unit

SMALL = {"min_words": 5, "target_words": 6, "max_words": 10, "window_words": 4, "window_overlap": 1}

# Words (whitespace-separated, header marks included): preamble 3, "# A" section 4, "## B" 6,
# "## C" 14, "# D" 3.
MARKDOWN = (
    "Intro words here.\n\n"
    "# A\none two\n\n"
    "## B\nthree four five six\n\n"
    "## C\nw1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12\n\n"
    "# D\nx\n"
)


class TestByFileTypeChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {"type": "by_file_type", "params": {
        "min_words": 5, "target_words": 12, "max_words": 20, "window_words": 12, "window_overlap": 3,
        "code_max_chars": 400}}
    out_of_bounds: ClassVar[dict[str, Any]] = {"max_words": 5}


def chunk(name: str, text: str, metadata: dict[str, Any] | None = None, **params: Any) -> list:
    document = make_document(name, text, {"file_name": name.rsplit("/", 1)[-1], **(metadata or {})})
    return chunkers.build({"type": "by_file_type", "params": {**SMALL, **params}}).chunk([document])


def test_markdown_sections_small_ones_merged_long_ones_cut_into_target_windows():
    nodes = chunk("guide.md", MARKDOWN, {"file_type": "md"})
    assert [(n.text, n.metadata.get("breadcrumb"), n.metadata.get("merged_sections")) for n in nodes] == [
        # preamble (3 < 5 words) takes "# A" (4): 7 words, enough
        ("Intro words here.\n\n# A\none two", "A", 2),
        ("## B\nthree four five six", "A > B", None),  # 6 words: alone
        # "## C": 14 words > max 10: windows of 6 words, 1 repeated
        ("## C\nw1 w2 w3 w4", "A > C", None),
        ("w4 w5 w6 w7 w8 w9", "A > C", None),
        ("w9 w10 w11 w12", "A > C", None),
        # "# D" (3 words) is small and last, but 14 + 3 > 10: it stays alone
        ("# D\nx", "D", None),
    ]
    assert {n.metadata["chunked_as"] for n in nodes} == {"markdown"}


def test_a_small_last_section_joins_the_one_before_when_both_fit():
    nodes = chunk("notes.md", "# A\none two three four\n\n# B\nfive\n", {"file_type": "md"})
    assert [n.text for n in nodes] == ["# A\none two three four\n\n# B\nfive"]  # 6 + 3 <= 10
    assert nodes[0].metadata["merged_sections"] == 2


def test_python_by_definition_like_the_code_chunker():
    nodes = chunk("pkg/shapes.py", PYTHON, {"file_type": "py"})
    assert [(n.text.splitlines()[0], n.metadata.get("function") or n.metadata.get("class")) for n in nodes] == [
        ('"""A small module."""', None),
        ("# Scales a value.", "scale"),
        ("def area(r: float) -> float:", "area"),
        ("class Shape:", "Shape"),
        ("if __name__ == '__main__':", None),
    ]
    assert nodes[2].metadata["signature"] == "def area(r: float) -> float"
    assert {n.metadata["chunked_as"] for n in nodes} == {"python"}


def test_python_that_does_not_parse_falls_back_to_word_windows():
    nodes = chunk("broken.py", "def broken(:\n    one two three four five", {"file_type": "py"})
    assert [n.text for n in nodes] == ["def broken(:\n    one two", "two three four five"]
    assert all(n.metadata["chunk_fallback"] == "words" for n in nodes)


def test_any_other_file_in_word_windows():
    text = "a1 a2 a3 a4 a5 a6 a7 a8 a9 a10"
    nodes = chunk("notes.txt", text, {"file_type": "txt"})
    # windows of 4 words, 1 repeated: words 1-4, 4-7, 7-10
    assert [n.text for n in nodes] == ["a1 a2 a3 a4", "a4 a5 a6 a7", "a7 a8 a9 a10"]
    assert {n.metadata["chunked_as"] for n in nodes} == {"words"}
    assert word_windows(text, 0, len(text), 20, 1) == [(0, len(text))]


@pytest.mark.parametrize(("metadata", "kind"), [
    ({"file_type": "md"}, "markdown"), ({"file_type": "MARKDOWN"}, "markdown"), ({"file_type": "py"}, "python"),
    ({"file_name": "a/b.pyi"}, "python"), ({"file_name": "README.md"}, "markdown"), ({"file_type": "yaml"}, "words"),
    ({"file_type": "txt", "file_name": "x.py"}, "words"), ({}, "words"),
])
def test_the_file_type_in_the_metadata_decides(metadata, kind):
    assert file_kind(metadata) == kind


def test_related_ids_are_the_neighbours_then_the_same_section_in_order():
    nodes = chunk("guide.md", MARKDOWN, {"file_type": "md"})
    ids = [n.node_id for n in nodes]
    assert [[ids.index(i) for i in n.metadata["related_chunk_ids"]] for n in nodes] == [
        [1], [0, 2], [1, 3, 4], [2, 4], [3, 5, 2], [4]]
    capped = chunk("guide.md", MARKDOWN, {"file_type": "md"}, max_related_ids=2)
    assert [[ids.index(i) for i in n.metadata["related_chunk_ids"]] for n in capped][4] == [3, 5]
    # Stored in the chunk set's metadata column (JSON), neither embedded nor shown to an LLM.
    stored = [json.loads(m)["related_chunk_ids"] for m in chunk_frame(nodes)["metadata"]]
    assert stored == [n.metadata["related_chunk_ids"] for n in nodes]
    assert all("related_chunk_ids" in n.excluded_llm_metadata_keys for n in nodes)
    assert all(n.metadata["embed_text"] == n.text for n in nodes)


def test_summaries_and_contextualised_embeddings_on_every_type(tmp_path):
    backend = ScriptedLLM(["One line about it."])
    chunker = chunkers.build({"type": "by_file_type", "params": {**SMALL, "summaries": True,
                                                                  "contextualize": True}})
    chunker.use_llm(LLMClient(backend, tmp_path))
    documents = [make_document("guide.md", MARKDOWN, {"file_type": "md", "title": "Guide"}),
                 make_document("shapes.py", PYTHON, {"file_type": "py", "title": "shapes"}),
                 make_document("notes.txt", "a1 a2 a3 a4 a5 a6", {"file_type": "txt", "title": "notes"})]
    nodes = chunker.chunk(documents)
    assert {n.metadata["chunked_as"] for n in nodes} == {"markdown", "python", "words"}
    for node in nodes:
        assert node.metadata["summary"] == node.metadata["doc_summary"] == "One line about it."
        context = [node.metadata["title"], node.metadata.get("breadcrumb"), "One line about it."]
        assert node.metadata["embed_text"] == "\n".join(p for p in context if p) + "\n\n" + node.text
    assert len(backend.requests) == len(nodes) + len(documents)  # one per chunk, one per document


def test_not_offered_to_the_chunking_judge_so_its_chunk_set_keys_stay():
    assert "by_file_type" in chunkers.names() and "by_file_type" not in judge_choosable_chunkers()
    assert "markdown" in judge_choosable_chunkers()


@pytest.mark.parametrize(("params", "named"), [
    ({"min_words": 600}, "min_words (600)"), ({"window_overlap": 512}, "window_overlap (512)"),
])
def test_inconsistent_sizes_are_one_line_naming_the_values(params, named):
    with pytest.raises(ConfigError) as error:
        chunkers.build({"type": "by_file_type", "params": params})
    assert named in str(error.value) and "\n" not in str(error.value)


@pytest.mark.integration
@pytest.mark.slow  # four calls to the 135M model (one summary per chunk and per document)
def test_real_local_model_writes_chunk_and_document_summaries(local_backend, tmp_path):
    chunker = chunkers.build({"type": "by_file_type", "params": {"summaries": True, "contextualize": True}})
    chunker.use_llm(LLMClient(local_backend, cache_dir=tmp_path))
    documents = [make_document("retry.py", "def next_delay(attempt: int) -> float:\n    return 2.0 ** attempt\n",
                               {"file_type": "py", "title": "retry"}),
                 make_document("notes.txt", "Jobs are retried five times before they are dropped.",
                               {"file_type": "txt", "title": "notes"})]
    nodes = chunker.chunk(documents)
    assert [n.metadata["chunked_as"] for n in nodes] == ["python", "words"]
    for node in nodes:
        summary = node.metadata.get("summary")
        assert (summary and len(summary) <= 200 and summary in node.metadata["embed_text"]) or node.metadata.get(
            "summary_error")
        assert node.metadata.get("doc_summary") or node.metadata.get("doc_summary_error")
