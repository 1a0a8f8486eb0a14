"""A judge registered by a plugin (entry-point group ``ragkit.judges``) with no place in the pipeline
is refused with one line naming the places, by the config loader and by `ragkit run` (issue 26, item 7).

The pipeline runs judges only at fixed places, by name; such a judge would validate and multiply
the grid while its runs were judge-off runs under another id."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict, judge_names, load_config
from ragkit.judges.base import PIPELINE_SLOTS, Judge, judges

PLACES = ("chunking, router, condense, strategy, hyde, multi_query, quality_gate, retrieval, rerank, enrichment, "
          "groundedness, answer_check")
MESSAGE = ("judges: 'fact_checker' has no place in the pipeline, so it would never run (registered through the "
           f"entry-point group ragkit.judges). The pipeline runs judges at: {PLACES}")
CONFIG = {"name": "t", "dataset": {"path": "/data/x"}, "retrievers": ["bm25"], "embedders": [],
          "judges": {"fact_checker": "both"}}


class FactChecker(Judge):
    """A plugin's judge: valid params and modes, but no place the pipeline calls."""

    name: ClassVar[str] = "fact_checker"


class PluginEntryPoint:
    """What ``importlib.metadata`` yields for ``fact_checker = "some_plugin:FactChecker"``."""

    name = "fact_checker"

    def load(self) -> type[Judge]:
        return FactChecker


@pytest.fixture
def plugin_judge(monkeypatch):
    """``fact_checker`` installed as if by a plugin package, through the registry's entry points."""
    installed = judges._entry_points

    def with_plugin() -> dict[str, Any]:
        return {**installed(), "fact_checker": PluginEntryPoint()}

    monkeypatch.setattr(judges, "_entry_points", with_plugin)
    monkeypatch.setattr(judges, "_loaded", {})
    assert "fact_checker" in judges.names() and judges.get("fact_checker") is FactChecker


@pytest.mark.unit
def test_every_built_in_judge_has_a_place_and_every_place_a_judge():
    assert set(judges.names()) == set(PIPELINE_SLOTS)


@pytest.mark.unit
def test_the_config_loader_refuses_a_plugin_judge_without_a_place(plugin_judge, tmp_path):
    with pytest.raises(ConfigError) as error:
        config_from_dict(CONFIG)
    assert str(error.value) == f"config: {MESSAGE}"
    path = tmp_path / "plugin.yaml"
    path.write_text("name: t\ndataset: {path: /data/x}\nretrievers: [bm25]\nembedders: []\n"
                    "judges: {fact_checker: llm, rerank: heuristic}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"has no place in the pipeline") as error:
        load_config(path)
    assert "\n" not in str(error.value) and str(error.value).endswith(PLACES)
    # Not offered where judges are listed (the dashboard's form), nor as an LLM role.
    assert "fact_checker" not in judge_names() and "rerank" in judge_names()
    with pytest.raises(ConfigError, match=r"unknown role \['fact_checker'\]"):
        config_from_dict({**CONFIG, "judges": {}, "llm": {"roles": {"fact_checker": "local"}}})


@pytest.mark.unit
def test_a_name_nobody_registered_is_still_an_unknown_judge(plugin_judge):
    with pytest.raises(ConfigError, match=r"unknown judge \['fact_checkr'\]\. Valid judges: answer_check, "):
        config_from_dict({**CONFIG, "judges": {"fact_checkr": "llm"}})


@pytest.mark.integration
def test_ragkit_run_refuses_it_in_one_line_with_exit_code_2(plugin_judge, tmp_path, capsys):
    from ragkit.cli import main

    path = tmp_path / "plugin.yaml"
    path.write_text("name: t\ndataset: {path: questions.jsonl}\nretrievers: [bm25]\nembedders: []\n"
                    "judges: {fact_checker: both}\n", encoding="utf-8")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.rstrip("\n").endswith(MESSAGE)
