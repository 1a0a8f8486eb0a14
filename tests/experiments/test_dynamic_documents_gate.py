"""experiments/reference/dynamic_documents.yaml as written, on the bundled multi-turn sample, with a
scripted LLM (the router's and the generator's; the gate is heuristic): the quality gate's
thresholds mean something on its scale, so it passes the questions the documents answer and falls
back to the web only where retrieval really fails, each verdict saying why. (Its thresholds on
hybrid's RRF scores, at most 2/60, failed every question; the config check now refuses them.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DYNAMIC = REPO / "experiments" / "reference" / "dynamic_documents.yaml"
SAMPLE = REPO / "datasets" / "multiturn_sample"
# Questions whose answer is in their document, and questions no document is about.
IN_THE_DOCUMENTS = {"mt01", "mt03", "mt04", "mt06", "mt07"}
OFF_CORPUS = {"mt10", "mt11"}


class ScriptedParams(LLMParams):
    model: str = "dynamic"


class Scripted(LLMBackend):
    """The generator's only LLM here (the router is off, condensing and the gate are rules): a cited sentence."""

    name: ClassVar[str] = "dynamic"
    Params: ClassVar[type[ComponentParams]] = ScriptedParams

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        return BackendReply(text="It is in the first source [1].", prompt_tokens=5, completion_tokens=5)


def decisions(frame) -> list[dict[str, Any]]:
    return [json.loads(d) if isinstance(d, str) else d for d in frame["decision"]]


def test_the_gate_passes_what_the_documents_answer_and_falls_back_where_retrieval_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    data: dict[str, Any] = yaml.safe_load(DYNAMIC.read_text(encoding="utf-8"))
    data["dataset"] = {**data["dataset"], "path": str(SAMPLE)}
    data["judges"]["router"]["mode"] = "off"  # every question reaches the gate
    data["llm"] = {"default": "dynamic"}
    out = tmp_path / "out"
    with llms.registered("dynamic", Scripted):
        run_experiment(config_from_dict(data), out)
    store = ResultStore(out)
    runs, judgements = store.read("runs"), store.read("judgements")
    fallback_runs = set(runs.loc[runs["judge.quality_gate.web_fallback"].eq(True), "run_id"])
    assert fallback_runs
    gate = judgements[(judgements["judge"] == "quality_gate") & judgements["run_id"].isin(fallback_runs)]
    finals = {(row.run_id, row.question_id): d for row, d in zip(gate.itertuples(), decisions(gate))
              if "chosen_attempt" in d}
    first_rounds = {(row.run_id, row.question_id): d for row, d in zip(gate.itertuples(), decisions(gate))
                    if d.get("round") == 1}
    passed = {key for key, d in first_rounds.items() if d["sufficient"]}
    # The gate passes questions the documents answer (it failed every question on RRF scores).
    assert {question for _, question in passed} >= IN_THE_DOCUMENTS - {"mt07"}
    web = judgements[(judgements["judge"] == "web") & judgements["run_id"].isin(fallback_runs)]
    fell_back = set(zip(web["run_id"], web["question_id"]))
    assert all(d["because"] == "the quality gate failed" for d in decisions(web))
    # It falls back exactly where no attempt passed, and the off-corpus questions are among those.
    failed = {key for key, d in finals.items() if not any(a.get("sufficient") for a in d.get("attempts", []))
              and not first_rounds[key]["sufficient"]}
    assert fell_back == failed
    assert {question for _, question in fell_back} >= OFF_CORPUS
    assert not {question for _, question in fell_back} & IN_THE_DOCUMENTS
    # Each failing verdict says why, on the question-overlap scale.
    for key in fell_back:
        reason = first_rounds[key]["reason"]
        assert "question overlap" in reason and ("< 0.5" in reason or "< 0.3" in reason)


def test_a_heuristic_gate_whose_thresholds_rrf_scores_cannot_reach_is_refused():
    data: dict[str, Any] = yaml.safe_load(DYNAMIC.read_text(encoding="utf-8"))
    data["dataset"] = {**data["dataset"], "path": str(SAMPLE)}
    data["judges"]["quality_gate"]["params"] = [{"preset": "basic"}]
    with pytest.raises(ConfigError) as raised:
        config_from_dict(data)
    message = str(raised.value)
    assert "\n" not in message
    assert "quality_gate" in message and "top 0.5, mean 0.3" in message and "'hybrid'" in message
    assert "0.0333" in message and "attempt_scale: question_overlap" in message
