"""Config for the agentic loops: a judge's params as a list of variants, what each loop needs
(answers, an embedder), the web provider, and how run rows show toggled options."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict, expand_grid
from ragkit.experiments.plan import make_plan, run_row
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet

pytestmark = pytest.mark.unit


def config(**fields):
    return config_from_dict({"name": "loops", "dataset": {"path": "q.jsonl"}, **fields})


def test_a_list_of_params_runs_each_variant_and_off_once():
    cfg = config(generator=True, judges={"groundedness": {
        "mode": "both", "params": [{"on_fail": "off"}, {"on_fail": "re_retrieve", "max_corrections": 1}]}})
    specs = [point.judges[0].params for point in expand_grid(cfg)]
    assert [p["mode"] for p in specs] == ["off", "llm", "llm"]
    assert [p.get("on_fail") for p in specs] == [None, None, "re_retrieve"]  # at its default: left out of the key


def test_an_empty_variant_list_and_a_mode_inside_params_are_named():
    with pytest.raises(ConfigError, match=r"judges\.groundedness: params is an empty list"):
        config(generator=True, judges={"groundedness": {"mode": "llm", "params": []}})
    with pytest.raises(ConfigError, match="set the mode with 'mode'"):
        config(generator=True, judges={"groundedness": {"mode": "llm", "params": [{"mode": "off"}]}})


def test_a_bad_option_value_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"on_fail.*'off', 'regenerate' or 're_retrieve'"):
        config(generator=True, judges={"groundedness": {"mode": "llm", "params": {"on_fail": "retry"}}})


@pytest.mark.parametrize("judge", ["router", "answer_check"])
def test_judges_that_read_answers_need_the_generator(judge):
    with pytest.raises(ConfigError, match=f"judges \\['{judge}'\\] need generated answers"):
        config(judges={judge: "llm"})


def test_the_web_provider_is_validated_and_kept_only_where_the_web_can_be_used():
    with pytest.raises(ConfigError, match=r"unknown web 'bing'\. Valid choices: http"):
        config(web="bing")
    with pytest.raises(ConfigError, match="url"):
        config(web={"type": "http", "params": {"url": "ftp://x"}})
    cfg = config(generator=True, web={"type": "http", "params": {"url": "http://127.0.0.1:1/search"}},
                 judges={"router": ["off", "heuristic"]})
    points = expand_grid(cfg)
    assert [(p.judges[0].params["mode"], p.web is not None) for p in points] == [("off", False), ("heuristic", True)]


def _plan(cfg):
    corpus = Corpus.from_documents("c", [make_document("d1", "Cats purr. " * 5)])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    local = llms.resolve({"type": "local"})
    roles = dict.fromkeys(("router", "generator", "groundedness"), local)
    return make_plan(cfg, corpus, questions, roles)


def test_the_web_provider_is_part_of_the_run_id_only_of_runs_that_may_use_it():
    web_a = {"type": "http", "params": {"url": "http://127.0.0.1:1/a"}}
    web_b = {"type": "http", "params": {"url": "http://127.0.0.1:1/b"}}
    judges = {"router": ["off", "heuristic"]}
    plan_a = _plan(config(generator=True, web=web_a, judges=judges))
    plan_b = _plan(config(generator=True, web=web_b, judges=judges))
    ids_a = {run.point.judges[0].params["mode"]: run.run_id for run in plan_a.runs}
    ids_b = {run.point.judges[0].params["mode"]: run.run_id for run in plan_b.runs}
    assert ids_a["off"] == ids_b["off"] and ids_a["heuristic"] != ids_b["heuristic"]
    row = run_row(plan_a, next(run for run in plan_a.runs if run.point.web is not None))
    assert row["web"] == "http"


def test_run_rows_show_a_toggled_option_at_its_default_too():
    plan = _plan(config(generator=True, judges={"groundedness": {
        "mode": "llm", "params": [{"on_fail": "off"}, {"on_fail": "regenerate"}]}}))
    rows = [run_row(plan, run) for run in plan.runs]
    assert sorted(row["judge.groundedness.on_fail"] for row in rows) == ["off", "regenerate"]


def test_unquoted_off_in_a_yaml_list_of_modes_is_the_mode_off(tmp_path):
    from ragkit.experiments.config import load_config

    path = tmp_path / "x.yaml"
    path.write_text("name: x\ndataset: {path: q.jsonl}\ngenerator: true\njudges:\n  router: [off, heuristic]\n"
                    "  rerank: {mode: [off, on]}\n")
    # judges in name order: rerank, router
    modes = sorted((p.judges[0].params["mode"], p.judges[1].params["mode"]) for p in expand_grid(load_config(path)))
    assert modes == [("llm", "heuristic"), ("llm", "off"), ("off", "heuristic"), ("off", "off")]


def test_a_bm25_point_keeps_its_embedder_only_when_retrieval_may_switch_to_dense():
    plain = expand_grid(config(retrievers=["bm25"]))
    switching = expand_grid(config(retrievers=["bm25"], judges={"strategy": "heuristic"}))
    gate = expand_grid(config(retrievers=["bm25"], judges={"quality_gate": {
        "mode": "heuristic", "params": {"switch_strategy": {"no_coverage": "dense"}}}}))
    assert plain[0].embedder is None
    assert switching[0].embedder is not None and gate[0].embedder is not None
    with pytest.raises(ConfigError, match="add an embedder"):
        config(retrievers=["bm25"], embedders=[], judges={"strategy": "heuristic"})
