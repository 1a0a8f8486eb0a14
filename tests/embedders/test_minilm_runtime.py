"""``minilm`` runs on ONNX Runtime when it is installed and on torch otherwise, as one embedder:
the same identity and run ids whichever runs it, and the same vectors within 1e-5 cosine."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ragkit.embedders.base import embedders
from ragkit.embedders.local import MiniLMEmbedder, MiniLMParams
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import component_key
from ragkit.settings import get_settings
from tests.embedders.test_onnx_minilm import cosine_distances, sample_texts


def use_runtime(monkeypatch, runtime: str | None, *, onnxruntime_installed: bool = True) -> None:
    if runtime is None:
        monkeypatch.delenv("RAGKIT_MINILM_RUNTIME", raising=False)
    else:
        monkeypatch.setenv("RAGKIT_MINILM_RUNTIME", runtime)
    if not onnxruntime_installed:
        monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an import of a missing package does
    get_settings.cache_clear()


@pytest.mark.unit
@pytest.mark.parametrize(("setting", "installed", "expected"), [
    (None, True, "onnx"), ("auto", True, "onnx"), (None, False, "torch"), ("torch", True, "torch"),
    ("onnx", True, "onnx"),
])
def test_the_runtime_is_onnx_when_installed_unless_torch_is_asked_for(monkeypatch, setting, installed, expected):
    use_runtime(monkeypatch, setting, onnxruntime_installed=installed)
    assert MiniLMEmbedder(MiniLMParams()).runtime() == expected


@pytest.mark.unit
def test_asking_for_onnx_without_onnxruntime_is_one_clear_error(monkeypatch):
    use_runtime(monkeypatch, "onnx", onnxruntime_installed=False)
    with pytest.raises(ConfigError, match="RAGKIT_MINILM_RUNTIME=onnx needs onnx and onnxruntime"):
        MiniLMEmbedder(MiniLMParams()).runtime()


@pytest.mark.unit
def test_a_bad_runtime_setting_names_the_choices(monkeypatch):
    monkeypatch.setenv("RAGKIT_MINILM_RUNTIME", "cuda")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match=r"RAGKIT_MINILM_RUNTIME.*'auto', 'onnx' or 'torch'"):
        get_settings()


def _identity(monkeypatch, runtime: str, installed: bool) -> tuple[str, str, list[str]]:
    """The embedder's spec key, its cache key, and the run ids of a small grid, under one runtime."""
    from ragkit.corpus.model import Corpus, make_document
    from ragkit.experiments.plan import make_plan
    from ragkit.questions import Question, QuestionSet

    use_runtime(monkeypatch, runtime, onnxruntime_installed=installed)
    embedder = embedders.build(embedders.resolve("minilm"))
    assert embedder.runtime() == runtime
    corpus = Corpus.from_documents("c", [make_document("d1", "Cats purr when content. " * 5)])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    config = config_from_dict({"name": "t", "dataset": {"path": "unused.jsonl"}, "embedders": ["minilm"],
                               "retrievers": ["dense", "hybrid"], "top_k": [5]})
    plan = make_plan(config, corpus, questions, {})
    return embedder.spec_key(), component_key(embedders, embedders.resolve("minilm")), \
        sorted(run.run_id for run in plan.runs)


@pytest.mark.unit
def test_run_ids_and_the_embedding_cache_key_are_the_same_with_and_without_onnxruntime(monkeypatch):
    with_onnx = _identity(monkeypatch, "onnx", installed=True)
    without = _identity(monkeypatch, "torch", installed=False)
    assert with_onnx == without and len(with_onnx[2]) == 2


@pytest.mark.slow
def test_vectors_are_the_same_within_1e_5_with_and_without_onnxruntime(monkeypatch):
    texts = sample_texts()
    use_runtime(monkeypatch, None)
    onnx = MiniLMEmbedder(MiniLMParams())
    onnx_vectors, onnx_query = onnx.embed_texts(texts), onnx.embed_query(texts[0])
    use_runtime(monkeypatch, None, onnxruntime_installed=False)
    torch = MiniLMEmbedder(MiniLMParams())
    torch_vectors, torch_query = torch.embed_texts(texts), torch.embed_query(texts[0])
    assert (onnx.runtime(), torch.runtime()) == ("onnx", "torch")
    distances = cosine_distances(onnx_vectors, torch_vectors)
    print(f"minilm onnx vs torch on {len(texts)} texts: worst cosine distance {distances.max():.2e}")
    assert distances.max() < 1e-5
    assert 1.0 - float(np.dot(onnx_query, torch_query)) < 1e-5
    # The LlamaIndex model (what the semantic chunker and the answer metrics get) is the same one.
    assert 1.0 - float(np.dot(onnx.embed_model().get_text_embedding(texts[1]), torch_vectors[1])) < 1e-5
