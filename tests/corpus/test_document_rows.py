"""The corpus kept as rows (``DocumentRows``) reads as the Documents it was made from, and its
key is the one the whole list of (id, text hash) pairs gave."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, DocumentRows, make_document
from ragkit.hashing import content_key, content_key_of_rows, text_sha256

pytestmark = pytest.mark.unit

DOCUMENTS = [make_document("b.txt", "second", {"title": "B", "page_starts": [0, 3]}),
             make_document("a'ü.md", "first \"quoted\"\n"), make_document("c", "")]


@pytest.mark.parametrize("rows", [[], [("a", "x")], [("d1", "ü\"\\\n"), ("d2", "'"), ("d3", "")]])
def test_the_row_by_row_key_is_the_whole_lists_key(rows: list[tuple[str, str]]) -> None:
    assert content_key_of_rows("corpus", iter(rows)) == content_key("corpus", rows)


def test_a_corpus_of_rows_reads_as_its_documents_sorted_by_id() -> None:
    corpus = Corpus.from_documents("c", DOCUMENTS)
    expected = sorted(DOCUMENTS, key=lambda d: d.id_)
    assert corpus.corpus_id == content_key("corpus", [(d.id_, text_sha256(d.text)) for d in expected])
    assert [(d.id_, d.text, d.metadata) for d in corpus.documents] == [(d.id_, d.text, d.metadata) for d in expected]
    assert corpus.documents[1].metadata == {"title": "B", "page_starts": [0, 3], "doc_id": "b.txt"}
    assert [d.id_ for d in corpus.documents[1:]] == ["b.txt", "c"] and isinstance(corpus.documents[1:], DocumentRows)
    assert [[d.id_ for d in batch] for batch in corpus.batches(2)] == [["a'ü.md", "b.txt"], ["c"]]
    corpus.documents[0].metadata["title"] = "changed"  # each read is a new Document: the corpus keeps its rows
    assert "title" not in corpus.documents[0].metadata
    assert Corpus.from_documents("c", list(corpus.documents)) == corpus


def test_documents_by_id_are_made_when_looked_up() -> None:
    by_id = Corpus.from_documents("c", DOCUMENTS).by_id()
    assert sorted(by_id) == ["a'ü.md", "b.txt", "c"] and len(by_id) == 3
    assert by_id["b.txt"].text == "second" and by_id.get("missing") is None
