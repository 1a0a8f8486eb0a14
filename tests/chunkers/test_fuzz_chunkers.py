"""Fuzzing every chunker: hostile text never raises, and every chunk is an exact, non-empty slice.

The properties are the contract's (tests/chunkers/test_chunker_contract.py) over generated text:
``text[start:end] == chunk``, no empty or whitespace-padded chunk, every non-whitespace
character in some chunk, consecutive chunk indexes. Profiles: tests/corpus/fuzzing.py.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.base.embeddings.base import BaseEmbedding

from ragkit.chunkers import chunkers
from ragkit.corpus.model import make_document
from tests.corpus.fuzzing import fuzz_settings, hostile_text


class HashEmbedding(BaseEmbedding):
    """A tiny deterministic stand-in for MiniLM: 16 numbers from a hash of the text."""

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).digest()
        return (np.frombuffer(digest[:16], dtype=np.uint8).astype(float) - 127.5).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


# Small sizes, so generated text gives many chunks; parameters are drawn within these bounds.
PARAMS = {
    "token": lambda: st.fixed_dictionaries({"chunk_size": st.integers(16, 64), "chunk_overlap": st.integers(0, 15)}),
    "sentence": lambda: st.fixed_dictionaries({"chunk_size": st.integers(16, 64), "chunk_overlap": st.integers(0, 15)}),
    "recursive": lambda: st.fixed_dictionaries({"chunk_size": st.integers(50, 200),
                                                "chunk_overlap": st.integers(0, 49)}),
    "markdown": lambda: st.fixed_dictionaries({"chunk_size": st.integers(50, 200),
                                               "chunk_overlap": st.integers(0, 49)}),
    "code": lambda: st.fixed_dictionaries({"max_chars": st.integers(200, 400),
                                           "fallback_chunk_size": st.integers(50, 200),
                                           "chunk_overlap": st.integers(0, 49)}),
    "document": lambda: st.just({}),
    "semantic": lambda: st.fixed_dictionaries({"buffer_size": st.integers(1, 3),
                                               "breakpoint_percentile_threshold": st.integers(1, 99)}),
}
FILE_NAMES = ["notes.txt", "guide.md", "module.py", "report.pdf", ""]


def check_chunks(spec: dict[str, Any], text: str, file_name: str, **deps: Any) -> None:
    document = make_document("doc", text, {"file_name": file_name} if file_name else {})
    nodes = chunkers.build(spec, **deps).chunk([document])
    covered = [False] * len(text)
    for index, node in enumerate(nodes):
        start, end = node.metadata["start_char"], node.metadata["end_char"]
        assert text[start:end] == node.text, f"chunk {index} is not the slice [{start}:{end}]"
        assert node.text and node.text == node.text.strip(), f"chunk {index} is empty or padded: {node.text!r}"
        assert node.metadata["chunk_index"] == index
        covered[start:end] = [True] * (end - start)
    missed = [i for i, char in enumerate(text) if not char.isspace() and not covered[i]]
    assert not missed, f"characters at {missed[:5]} ({text[missed[0]]!r}...) are in no chunk"
    if not text.strip():
        assert not nodes


@pytest.mark.parametrize("name", ["token", "sentence", "recursive", "markdown", "code", "document", "semantic"])
@fuzz_settings(ci=25, full=900)
@given(data=st.data())
def test_fuzz_chunkers(name: str, data: st.DataObject) -> None:
    params = data.draw(PARAMS[name](), label="params")
    text = data.draw(hostile_text, label="text")
    file_name = data.draw(st.sampled_from(FILE_NAMES), label="file_name")
    deps = {"embed_model": HashEmbedding()} if name == "semantic" else {}
    check_chunks({"type": name, "params": params}, text, file_name, **deps)


@pytest.mark.integration
# No deadline: the cost is the model's, one embedding per sentence (1,500 one-character
# sentences take minutes on a small CPU); what is checked here is the spans.
@settings(fuzz_settings(ci=4, full=40), deadline=None)
@given(text=hostile_text)
def test_fuzz_semantic_chunker_with_the_real_minilm(minilm_embed_model, text: str) -> None:
    spec = {"type": "semantic", "params": {"breakpoint_percentile_threshold": 80}}
    check_chunks(spec, text, "notes.txt", embed_model=minilm_embed_model)


# Found by the full profile; kept as plain tests so CI runs them every time.


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "size", "overlap"),
    [
        # The 31st window is the 30th minus its first split plus "\n": the same text once stripped.
        # It went on the next "<div><div><div>", after the newline, and the 32nd found no place.
        ("<div>" * 9 + "\n" + "<div>" * 9 + "\n", 16, 15),
        # The 4th window ends in spaces that used up the overlap; "- item\n      - item" also
        # reads at the first item, which left the 5th chunk no place.
        ("> > > quoted\n" * 6 + "      - item\n" * 4 + "> > > quoted\n", 16, 3),
    ],
    ids=["newline-only-window", "overlap-spent-on-spaces"],
)
def test_repeated_text_that_reads_at_two_places_is_still_placed(text: str, size: int, overlap: int) -> None:
    check_chunks({"type": "token", "params": {"chunk_size": size, "chunk_overlap": overlap}}, text, "notes.txt")


@pytest.mark.integration
def test_a_long_tail_of_whitespace_splits_is_placed_in_linear_time() -> None:
    # Every start tried in the tail re-read all of it: 8,000 tabs took 21 s, 15,000 over 90 s.
    # CPU time of this process, not wall time: other processes on a loaded machine do not count.
    text = "|" * 1024 + "word " * 16_000 + "\t" * 16_000
    started = time.process_time()
    check_chunks({"type": "sentence", "params": {"chunk_size": 22, "chunk_overlap": 10}}, text, "notes.txt")
    assert time.process_time() - started < 20
