"""Stages declare their role; one a plugin registers (entry-point group ``ragkit.judges``) with no
role, or a role the pipeline does not have, is refused with one line naming the valid roles, by the
config loader and by `ragkit run` (issue 26, item 7; issue 30, item 3).

The pipeline runs stages by their declared role; a stage without one would validate and multiply
the grid while its runs were judge-off runs under another id."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict, judge_names, load_config
from ragkit.stages.base import BUILT_IN_STAGES, STAGES, Stage
from ragkit.stages.roles import ROLE_NAMES, ROLES, in_pipeline_order, reads_of, role_of, writes_of

REPO = Path(__file__).resolve().parents[2]
ROLE_LIST = "chunking, route, follow_up, profile, strategy, transform, gate, refine, context, generate, verify, check"
MESSAGE = ("judges: 'fact_checker' declares no role, so the pipeline has no place to run it. "
           f"Valid roles: {ROLE_LIST}")
CONFIG = {"name": "t", "dataset": {"path": "/data/x"}, "retrievers": ["bm25"], "embedders": [],
          "judges": {"fact_checker": "both"}}


class FactChecker(Stage):
    """A plugin's judge: valid params and modes, but no role the pipeline could run it in."""

    name: ClassVar[str] = "fact_checker"


class PluginEntryPoint:
    """What ``importlib.metadata`` yields for ``fact_checker = "some_plugin:FactChecker"``."""

    name = "fact_checker"

    def load(self) -> type[Stage]:
        return FactChecker


@pytest.fixture
def plugin_judge(monkeypatch):
    """``fact_checker`` installed as if by a plugin package, through the registry's entry points."""
    installed = STAGES._entry_points

    def with_plugin() -> dict[str, Any]:
        return {**installed(), "fact_checker": PluginEntryPoint()}

    monkeypatch.setattr(STAGES, "_entry_points", with_plugin)
    monkeypatch.setattr(STAGES, "_loaded", {})
    assert "fact_checker" in STAGES.names() and STAGES.get("fact_checker") is FactChecker


@pytest.mark.unit
def test_every_built_in_stage_declares_a_role_and_they_run_in_the_old_fixed_order():
    # The order the pipeline ran its fixed slots in before stages declared roles, with the profile
    # judge (added since) before the strategy judge that reads it.
    slots = ["chunking", "router", "condense", "profile", "strategy", "hyde", "multi_query", "quality_gate",
             "retrieval", "rerank", "enrichment", "generator", "groundedness", "answer_check"]
    # Stages added since, each in its place in that order.
    slots.insert(slots.index("enrichment") + 1, "compression")
    assert set(STAGES.names()) == set(BUILT_IN_STAGES) == set(slots)
    assert [cls.name for cls in in_pipeline_order(STAGES.get(name) for name in STAGES.names())] == slots
    assert ", ".join(ROLE_NAMES) == ROLE_LIST
    # Every role has a built-in; each built-in reads and returns what its role has, declared once, on the role.
    assert {role_of(STAGES.get(name)).name for name in slots} == set(ROLE_NAMES)
    for name in slots:
        stage, role = STAGES.get(name), role_of(STAGES.get(name))
        # A stage declares its reads only to opt in to a role's optional read (the router's named
        # documents, the generator's retrieval quality), so a plugin without it is not given it.
        assert stage.inputs is None or (name in ("router", "generator") and stage.inputs == role.reads), name
        assert stage.outputs is None, name
        assert (reads_of(stage), writes_of(stage)) == (role.reads, role.writes)


@pytest.mark.unit
def test_a_role_the_pipeline_does_not_have_is_one_line_naming_the_valid_roles():
    class Misplaced(FactChecker):
        name: ClassVar[str] = "misplaced"
        role: ClassVar[str] = "postprocess"

    with STAGES.registered("misplaced", Misplaced), pytest.raises(ConfigError) as error:
        config_from_dict({**CONFIG, "judges": {"misplaced": "llm"}})
    assert str(error.value) == ("config: judges: 'misplaced' declares role 'postprocess', so the pipeline has no "
                                f"place to run it. Valid roles: {ROLE_LIST}")
    assert "misplaced" not in judge_names()


@pytest.mark.unit
def test_a_stage_reading_what_its_role_does_not_have_is_refused():
    class Early(FactChecker):
        name: ClassVar[str] = "early"
        role: ClassVar[str] = "context"
        inputs: ClassVar[tuple[str, ...]] = ("query", "answer")

    with pytest.raises(ConfigError) as error:
        role_of(Early)
    context = next(role for role in ROLES if role.name == "context")
    assert str(error.value) == (f"judges: 'early' reads answer, which role 'context' does not have. Role 'context' "
                                f"reads: {', '.join(context.reads)}")


@pytest.mark.unit
def test_two_stages_in_a_role_that_takes_one_are_refused():
    class OtherChecker(FactChecker):
        name: ClassVar[str] = "other_checker"
        role: ClassVar[str] = "check"

    with STAGES.registered("other_checker", OtherChecker), pytest.raises(ConfigError) as error:
        config_from_dict({**CONFIG, "generator": True, "judges": {"other_checker": "llm", "answer_check": "llm"}})
    assert str(error.value) == ("config: judges: 'answer_check', 'other_checker' all run in role 'check', which "
                                "takes one stage; keep one of them")


@pytest.mark.unit
def test_the_config_loader_refuses_a_plugin_judge_without_a_place(plugin_judge, tmp_path):
    with pytest.raises(ConfigError) as error:
        config_from_dict(CONFIG)
    assert str(error.value) == f"config: {MESSAGE}"
    path = tmp_path / "plugin.yaml"
    path.write_text("name: t\ndataset: {path: /data/x}\nretrievers: [bm25]\nembedders: []\n"
                    "judges: {fact_checker: llm, rerank: heuristic}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"declares no role") as error:
        load_config(path)
    assert "\n" not in str(error.value) and str(error.value).endswith(ROLE_LIST)
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


@pytest.mark.unit
def test_built_ins_are_registered_in_code_so_a_stale_entry_point_cannot_break_them(monkeypatch):
    from importlib.metadata import EntryPoint

    from ragkit.registry import Registry
    from ragkit.stages.context.rerank import RerankJudge

    # An install made before the move: its entry point names a module that no longer exists.
    stale = {"rerank": EntryPoint("rerank", "ragkit.judges.rerank:RerankJudge", "ragkit.judges")}
    monkeypatch.setattr(Registry, "_entry_points", lambda self: stale)
    monkeypatch.setattr(STAGES, "_loaded", {})
    assert STAGES.get("rerank") is RerankJudge
    assert set(STAGES.names()) == set(BUILT_IN_STAGES)


@pytest.mark.unit
def test_every_built_in_stage_is_checked_against_its_roles_protocol():
    """``ragkit.stages.conformance`` holds one ``name: type[<Role protocol>] = <stage class>`` line per
    built-in, for mypy; each line names the protocol of the role the stage declares."""
    tree = ast.parse((REPO / "ragkit" / "stages" / "conformance.py").read_text(encoding="utf-8"))
    checked = {node.target.id: (ast.unparse(node.annotation), ast.unparse(node.value))
               for node in ast.walk(tree) if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    assert set(checked) == set(BUILT_IN_STAGES)
    for name, target in BUILT_IN_STAGES.items():
        stage = STAGES.get(name)
        assert checked[name] == (f"type[{role_of(stage).protocol.__name__}]", target.split(":")[1]), name


WRONG_STAGES = '''
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from llama_index.core.schema import NodeWithScore

from ragkit.stages.base import Stage, JudgementLog


class Keeps(Stage):
    name: ClassVar[str] = "keeps"
    role: ClassVar[str] = "context"

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        return nodes


class ForgetsTheLog(Stage):
    name: ClassVar[str] = "forgets_the_log"
    role: ClassVar[str] = "context"

    def process(self, query: str, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        return nodes


class ReturnsText(Stage):
    name: ClassVar[str] = "returns_text"
    role: ClassVar[str] = "context"

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> str:
        return query


if TYPE_CHECKING:
    from ragkit.stages.roles import ContextRole

    keeps: type[ContextRole] = Keeps
    forgets_the_log: type[ContextRole] = ForgetsTheLog
    returns_text: type[ContextRole] = ReturnsText
'''


@pytest.mark.unit
def test_mypy_fails_a_stage_whose_call_does_not_match_its_roles_protocol(tmp_path):
    """The check ``ragkit.stages.conformance`` makes of every built-in, made of three plugin stages:
    the one that matches the context role passes, the two that do not fail the lint."""
    stages = tmp_path / "plugin_stages.py"
    stages.write_text(WRONG_STAGES, encoding="utf-8")
    lines = WRONG_STAGES.splitlines()
    # The repository's mypy settings and cache (``make lint`` fills it), ragkit from this checkout.
    env = {**os.environ, "MYPYPATH": str(REPO)}
    child = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                            "--no-error-summary", str(stages)], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=600)
    assert child.returncode == 1, child.stdout + child.stderr
    errors = [line for line in child.stdout.splitlines() if ": error: " in line]
    failed = {lines[int(line.split(":")[1]) - 1].split(":")[0].strip() for line in errors}
    assert failed == {"forgets_the_log", "returns_text"}, child.stdout
