"""The by_file_type chunker's ``document_fields: design`` (issue 43 item 18): Python titles from the
module docstring, title-cased file stems, the author line and Python tags, on copies only."""

from __future__ import annotations

import pytest

from ragkit.chunkers import chunkers
from ragkit.chunkers.design_fields import author_in, design_fields, docstring_line, title_cased_stem
from ragkit.corpus.model import make_document

pytestmark = pytest.mark.unit

PYTHON = '''"""Retry policy for failed jobs.

Longer text.
"""
__author__ = "Ada Lovelace"

import os


def backoff(attempt):
    return 2 ** attempt
'''


@pytest.mark.parametrize(("name", "title"), [
    ("retry_policy.md", "Retry Policy"), ("docs/getting-started.txt", "Getting Started"), ("queue.py", "Queue"),
    ("README", "README"),
])
def test_file_stems_are_title_cased(name, title):
    assert title_cased_stem(name) == title


@pytest.mark.parametrize(("text", "author"), [
    ("Title\nAuthor: Grace Hopper\n\nBody", "Grace Hopper"), ("# Notes\n*By:* Alan Turing\n", "Alan Turing"),
    (" * @author Barbara Liskov\n", "Barbara Liskov"), ("__author__ = 'Ken Thompson'\n", "Ken Thompson"),
    ("The author: of this sentence is unknown, mid-line.", None), ("x" * 2100 + "\nAuthor: Late", None),
])
def test_the_author_line(text, author):
    assert author_in(text) == author


def test_python_title_from_the_docstring_author_and_tags():
    assert docstring_line(PYTHON) == "Retry policy for failed jobs."
    assert docstring_line("def broken(:\n") is None
    found = design_fields(PYTHON, {"file_name": "retry.py", "title": "retry", "tags": ["jobs", "python"]}, True)
    assert found == {"title": "Retry policy for failed jobs.", "author": "Ada Lovelace",
                     "tags": ["python", "code", "jobs"]}


def test_a_title_of_the_files_own_and_the_loaders_author_stay():
    metadata = {"file_name": "notes.md", "title": "Release notes", "author": "Docs team"}
    assert design_fields("Author: Someone\n# Release notes", metadata, False) == {}
    assert design_fields("no docstring = 1\n", {"file_name": "my_module.py", "title": "my_module"}, True) == {
        "title": "My Module", "tags": ["python", "code"]}


def test_the_chunker_carries_and_embeds_the_design_fields_and_leaves_the_document_alone():
    document = make_document("tinyqueue/retry.py", PYTHON, {"file_name": "retry.py", "title": "retry",
                                                            "file_type": "py"})
    chunker = chunkers.build({"type": "by_file_type", "params": {"document_fields": "design", "contextualize": True}})
    nodes = chunker.chunk([document])
    assert nodes and all(node.metadata["title"] == "Retry policy for failed jobs." for node in nodes)
    assert all(node.metadata["author"] == "Ada Lovelace" and node.metadata["tags"][:2] == ["python", "code"]
               for node in nodes)
    assert nodes[0].metadata["embed_text"].startswith("Retry policy for failed jobs.\n")
    assert document.metadata["title"] == "retry" and "author" not in document.metadata
    loader = chunkers.build({"type": "by_file_type", "params": {"contextualize": True}}).chunk([document])
    assert [n.text for n in loader] == [n.text for n in nodes] and loader[0].metadata["title"] == "retry"
    assert "document_fields" not in chunkers.resolve("by_file_type").params  # an added option at its default
