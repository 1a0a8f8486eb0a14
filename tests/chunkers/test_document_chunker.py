from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragkit.chunkers import chunkers
from tests.chunkers.test_chunker_contract import ChunkerContract, contract_documents

pytestmark = pytest.mark.unit


class TestDocumentChunker(ChunkerContract):
    spec: ClassVar[dict[str, Any]] = {"type": "document", "params": {}}


def test_one_chunk_per_document_holding_all_its_text():
    documents = [d for d in contract_documents() if d.text.strip()]
    nodes = chunkers.build("document").chunk(documents)
    assert [n.text for n in nodes] == [d.text.strip() for d in documents]
    assert [n.node_id for n in nodes] == [f"{d.id_}:0" for d in documents]
