"""ExperimentConfig: validation messages, grid expansion, overrides and path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict, expand_grid, load_config, parse_override

pytestmark = pytest.mark.unit

BASE = {"name": "t", "dataset": {"path": "/data/x"}}


def test_grid_is_the_product_and_bm25_gets_no_embedder():
    config = config_from_dict({
        **BASE,
        "chunkers": ["recursive", {"type": "token", "params": {"chunk_size": 128}}],
        "embedders": ["minilm", {"type": "huggingface", "params": {"model_path": "/m"}}],
        "retrievers": ["bm25", "dense"],
        "top_k": [5, 10],
    })
    points = expand_grid(config)
    # dense: 2 chunkers x 2 embedders x 2 k = 8; bm25 ignores the embedder: 2 chunkers x 2 k = 4
    assert len(points) == 12
    assert all(p.embedder is None for p in points if p.retriever.type == "bm25")
    assert {p.retriever.params["top_k"] for p in points} == {5, 10}


def test_resolved_specs_fill_defaults():
    point = expand_grid(config_from_dict({**BASE, "chunkers": ["recursive"], "retrievers": ["hybrid"]}))[0]
    assert point.chunker.params["chunk_size"] == 1000
    assert point.chunker.params["chunk_overlap"] == 200
    assert point.retriever.params["rrf_k"] == 60


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({**BASE, "chunkers": ["nope"]},
         "unknown chunker 'nope'. Valid choices: by_file_type, code, document, llm_semantic, markdown"),
        ({**BASE, "retrievers": [{"type": "mmr", "params": {"lambda": 0.3}}]}, "unknown parameter 'lambda'"),
        ({**BASE, "retrievers": [{"type": "mmr", "params": {"mmr_lambda": 3}}]}, "'mmr_lambda'"),
        ({**BASE, "top_k": [0]}, "top_k values must be between 1 and 1000"),
        ({**BASE, "colour": "red"}, "unknown field 'colour'"),
        ({**BASE, "corpus": {}}, "exactly one of 'name'"),
    ],
)
def test_bad_values_are_named(data, expected):
    with pytest.raises(ConfigError, match=None) as info:
        config_from_dict(data)
    assert expected in str(info.value)


def test_mmr_error_lists_valid_parameters():
    with pytest.raises(ConfigError) as info:
        config_from_dict({**BASE, "retrievers": [{"type": "mmr", "params": {"lambda": 0.3}}]})
    assert ("fetch_k, min_similarity, mmr_lambda, scope, score_threshold, semantic_cache, semantic_cache_store, "
            "top_k") in str(info.value)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [("top_k=[1, 3]", "top_k", [1, 3]), ("dataset.limit=5", "dataset.limit", 5), ("name=abc", "name", "abc")],
)
def test_parse_override(text, key, value):
    assert parse_override(text) == (key, value)


def test_paths_resolve_against_the_yaml_folder_and_set_against_cwd(tmp_path, monkeypatch):
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "e.yaml").write_text(yaml.safe_dump({**BASE, "dataset": {"path": "../data"}}))
    assert load_config(folder / "e.yaml").dataset.path == str((tmp_path / "data").resolve())
    monkeypatch.chdir(tmp_path)
    overridden = load_config(folder / "e.yaml", ["dataset.path=elsewhere/beir", "top_k=3"])
    assert overridden.dataset.path == str((tmp_path / "elsewhere" / "beir").resolve())
    assert overridden.top_k == [3]


def test_bundled_experiments_validate():
    for path in sorted(Path(__file__).resolve().parents[2].joinpath("experiments").glob("*.yaml")):
        assert load_config(path).name == path.stem


def test_a_bm25_only_grid_needs_no_embedder_but_dense_does():
    assert len(expand_grid(config_from_dict({**BASE, "embedders": [], "retrievers": ["bm25"]}))) == 1
    with pytest.raises(ConfigError, match=r"retrievers \['dense'\] need an embedder"):
        config_from_dict({**BASE, "embedders": [], "retrievers": ["bm25", "dense"]})


@pytest.mark.unit
def test_auto_embedder_is_minilm_without_a_server_and_ollama_when_one_answers(monkeypatch):
    from ragkit.experiments import config as config_module
    from ragkit.llms import defaults

    base = {"name": "x", "dataset": {"path": "d"}}
    monkeypatch.setattr(defaults, "ollama_answers", lambda url, timeout_s=0.5: False)
    assert [s.type for s in config_module.config_from_dict({**base, "embedders": ["auto"]}).embedders] == ["minilm"]
    monkeypatch.setattr(defaults, "ollama_answers", lambda url, timeout_s=0.5: True)
    config = config_module.config_from_dict({**base, "embedders": [{"type": "auto",
                                                                    "params": {"ollama_model": "mxbai"}}]})
    (spec,) = config.embedders
    assert spec.type == "ollama" and spec.params["model_name"] == "mxbai"
    with pytest.raises(ConfigError, match="ollama_model"):
        config_module.config_from_dict({**base, "embedders": [{"type": "auto", "params": {"size": 3}}]})


def test_a_baseline_names_a_factor_and_level_of_the_grid_and_is_no_part_of_any_run_id():
    config = config_from_dict({**BASE, "chunkers": ["recursive", "token"], "top_k": [5, 10],
                               "baseline": {"chunker": "token", "top_k": 10}})
    assert config.baseline == {"chunker": "token", "top_k": "10"}  # a level as the runs table names it
    assert expand_grid(config) == expand_grid(config.model_copy(update={"baseline": {}}))
    with pytest.raises(ConfigError, match=r"baseline: unknown factor 'chunkers'\. Valid factors: chunker, "
                                          r"embedder, retriever, top_k"):
        config_from_dict({**BASE, "baseline": {"chunkers": "token"}})
    with pytest.raises(ConfigError, match=r"baseline: unknown level 'sentence' of chunker\. Valid levels: "
                                          r"recursive, token"):
        config_from_dict({**BASE, "chunkers": ["recursive", "token"], "baseline": {"chunker": "sentence"}})


def test_the_named_baselines_are_stored_beside_the_results(tmp_path):
    from ragkit.results import ResultStore

    store = ResultStore(tmp_path / "results")
    assert store.read_baselines() == {"named": {}, "first_listed": {}}
    store.write_baselines({"chunker": "token"}, {"chunker": "recursive", "judge.rerank": "off"})
    assert ResultStore(tmp_path / "results").read_baselines() == {
        "named": {"chunker": "token"}, "first_listed": {"chunker": "recursive", "judge.rerank": "off"}}


def test_a_factor_not_named_is_tested_against_its_first_level_as_listed():
    from ragkit.experiments.baselines import first_listed_levels

    config = config_from_dict({**BASE, "chunkers": ["token", "recursive"], "retrievers": ["dense"],
                               "top_k": [10, 5], "judges": {"rerank": {"mode": ["llm", "off"]}}})
    # listed order for components; top_k sorted (the smallest first) and judge modes off first;
    # a factor with one level has no reference to name
    assert first_listed_levels(config) == {"chunker": "token", "top_k": "5", "judge.rerank": "off"}
