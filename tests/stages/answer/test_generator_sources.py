"""The generator's ``show_file_name`` (issue 31, item 3): each chunk shown after its source file's
name; off, the prompt is byte for byte the one before the option."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.llms import LLMClient
from ragkit.stages.answer.generator import Generator, GeneratorParams
from ragkit.stages.base import STAGES, JudgementLog
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.unit

NODES = [
    NodeWithScore(node=TextNode(id_="c1", text="Cats purr when content.",
                                metadata={"doc_id": "pets/cats.txt", "file_name": "cats.txt"}), score=0.9),
    NodeWithScore(node=TextNode(id_="c2", text="Dogs   bark\nat night.", metadata={"doc_id": "q-17"}), score=0.5),
]


def prompt(tmp_path, **params) -> str:
    backend = ScriptedLLM(["Cats purr [1]."])
    Generator(GeneratorParams(constrained=False, **params), LLMClient(backend, tmp_path)).generate(
        "why do cats purr", NODES, JudgementLog())
    return backend.requests[0][-1]["content"]


def test_each_chunk_is_shown_after_its_file_name_or_document_id(tmp_path):
    shown = prompt(tmp_path, show_file_name=True)
    assert "Sources:\n[1] (file: cats.txt) Cats purr when content.\n[2] (file: q-17) Dogs bark at night.\n" in shown


def test_off_the_prompt_is_unchanged(tmp_path):
    assert prompt(tmp_path / "a", show_file_name=False) == prompt(tmp_path / "b")
    assert "Sources:\n[1] Cats purr when content.\n[2] Dogs bark at night.\n" in prompt(tmp_path / "c")


def test_at_its_default_it_stays_out_of_the_spec():
    assert STAGES.resolve({"type": "generator", "params": {"show_file_name": False}}) == STAGES.resolve("generator")
