from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from ragkit.corpus.model import make_document
from ragkit.errors import ConfigError
from tests.chunkers.test_chunker_contract import PYTHON, ChunkerContract

pytestmark = pytest.mark.unit


class TestCodeChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {
        "type": "code", "params": {"max_chars": 400, "fallback_chunk_size": 120, "chunk_overlap": 30},
    }
    out_of_bounds: ClassVar[dict[str, Any]] = {"max_chars": 10}


def chunk(text: str, file_name: str = "m.py", **params) -> list:
    document = make_document(file_name, text, {"file_name": file_name})
    return chunkers.build({"type": "code", "params": params}).chunk([document])


def test_one_chunk_per_definition_with_its_exact_source():
    nodes = chunk(PYTHON)
    texts = [n.text for n in nodes]
    assert texts == [
        '"""A small module."""\n\nimport math\n\nRATE = 0.5',
        "# Scales a value.\n@staticmethod\ndef scale(x: float) -> float:\n    return x * RATE",
        "def area(r: float) -> float:\n    return math.pi * r * r",
        "class Shape:\n    sides = 0\n\n    def describe(self) -> str:\n        return f'{self.sides} sides'",
        "if __name__ == '__main__':\n    print(area(2.0))",
    ]
    assert [n.metadata.get("breadcrumb") for n in nodes] == [None, "scale", "area", "Shape", None]
    assert all("chunk_fallback" not in n.metadata for n in nodes)


def test_a_long_class_is_split_by_method():
    methods = "".join(f"    def method_{i}(self):\n        return {i}\n\n" for i in range(8))
    text = f"import os\n\n\nclass Big:\n    '''Docs.'''\n\n{methods}\ndef after():\n    pass\n"
    nodes = chunk(text, max_chars=200, chunk_overlap=20)
    methods_crumbs = [f"Big > method_{i}" for i in range(8)]
    assert [n.metadata.get("breadcrumb") for n in nodes] == [None, "Big", *methods_crumbs, "after"]
    assert nodes[1].text == "class Big:\n    '''Docs.'''"
    assert nodes[2].text == "def method_0(self):\n        return 0"


def test_a_long_function_is_split_recursively_under_max_chars():
    body = "".join(f"    value_{i} = {i} * {i}\n" for i in range(40))
    nodes = chunk(f"def long():\n{body}", max_chars=200, chunk_overlap=20)
    assert len(nodes) > 3 and all(len(n.text) <= 200 and n.metadata["breadcrumb"] == "long" for n in nodes)


@pytest.mark.parametrize(
    ("text", "file_name"),
    [("def broken(:\n    pass\n", "m.py"), ("print('hello')\n", "notes.md"), ("Just prose, not code.", "")],
)
def test_text_that_is_not_python_falls_back_to_recursive_and_says_so(text, file_name):
    nodes = chunk(text, file_name=file_name)
    assert nodes and all(n.metadata["chunk_fallback"] == "recursive" for n in nodes)


def test_carriage_return_line_endings_keep_exact_offsets():
    text = "x = 1\r\n\r\ndef f():\r\n    return 2\r\n\r\nclass A:\r\n    pass\r\n"
    assert [n.text for n in chunk(text)] == ["x = 1", "def f():\r\n    return 2", "class A:\r\n    pass"]


def test_fallback_overlap_must_be_below_sizes():
    with pytest.raises(ConfigError, match=r"chunk_overlap \(500\) must be smaller"):
        chunkers.build({"type": "code", "params": {"fallback_chunk_size": 400, "chunk_overlap": 500}})
