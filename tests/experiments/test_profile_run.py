"""The profile judge inside a real run: the executor hands it the corpus' document profiles
(written once per corpus and method, in llm mode by calls charged to no question), its
judgements are stored, and off is the run without it."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore
from tests.factories import write_beir

pytestmark = pytest.mark.integration


class ProfileRuleParams(LLMParams):
    model: str = "profile-rules"


class ProfileRuleLLM(LLMBackend):
    """Replies by the schema asked for; counts the calls per schema."""

    name: ClassVar[str] = "profile_rules"
    Params: ClassVar[type[ComponentParams]] = ProfileRuleParams
    calls: ClassVar[list[str]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        title = (json_schema or {}).get("title", "text")
        ProfileRuleLLM.calls.append(title)
        replies = {"DocumentProfileReply": {"type": "general", "technical_density": 0.2, "domain_tags": ["pets"]},
                   "QueryProfileReply": {"intent": "exploratory", "complexity": "simple", "reason": "open"}}
        return BackendReply(text=json.dumps(replies.get(title, {})), prompt_tokens=10, completion_tokens=5)


def test_the_profile_judge_runs_with_the_corpus_document_profiles(tmp_path, isolated_data_dir):
    dataset = write_beir(tmp_path / "beir")
    ProfileRuleLLM.calls = []
    with llms.registered("profile_rules", ProfileRuleLLM):
        config = config_from_dict({
            "name": "profiled", "dataset": {"path": str(dataset)}, "embedders": [], "retrievers": ["bm25"],
            "chunkers": [{"type": "token", "params": {"chunk_size": 16, "chunk_overlap": 0}}], "top_k": 3,
            "llm": {"default": "profile_rules"}, "judges": {"profile": {"mode": ["off", "heuristic", "llm"]}},
        })
        run_experiment(config, tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    runs, judgements, stages = store.read("runs"), store.read("judgements"), store.read("stages")
    assert sorted(runs["judge.profile"]) == ["heuristic", "llm", "off"]
    mode = dict(zip(runs["run_id"], runs["judge.profile"]))
    decisions = {(mode[r], q): json.loads(d) for r, q, d in zip(judgements["run_id"], judgements["question_id"],
                                                                 judgements["decision"])}
    assert {m for m, _ in decisions} == {"heuristic", "llm"}  # off records nothing
    assert decisions[("heuristic", "q1")]["intent"] == "factual"  # "what animal purrs"
    assert decisions[("heuristic", "q1")]["document_method"] == "heuristic"
    assert decisions[("llm", "q1")]["intent"] == "exploratory"
    assert decisions[("llm", "q1")]["document_method"] == "llm"
    assert decisions[("llm", "q1")]["domain_tags"] == ["pets"] and decisions[("llm", "q1")]["documents"] == 3
    # One call per document, once, charged to no question; one call per question in its own stage.
    assert ProfileRuleLLM.calls.count("DocumentProfileReply") == 3
    assert ProfileRuleLLM.calls.count("QueryProfileReply") == 3
    calls = stages[stages["stage"] == "judge:profile"].groupby(stages["run_id"].map(mode))["llm_calls"].sum()
    assert calls.to_dict() == {"heuristic": 0, "llm": 3}
    profiles = sorted(path.name.split("-")[1] for path in (isolated_data_dir / "profiles").iterdir())
    assert profiles == ["heuristic", "llm"]
