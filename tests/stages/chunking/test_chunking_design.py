"""The Chunking Judge's design options (issue 31, item 3): the strategies allowlist, the file name
in the prompt and the per-file-type size rules, on a scripted LLM; each off keeps today's judge."""

from __future__ import annotations

import re

import pytest

from ragkit.chunkers import chunkers
from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES
from ragkit.stages.chunking.stage import ChunkingJudge, ChunkingJudgeParams, judge_choosable_chunkers
from tests.stages.chunking.test_chunking_judge import PLAIN, ScriptedLLM, doc, reply

pytestmark = pytest.mark.unit

DESIGN_STRATEGIES = ["recursive", "sentence", "token"]
DESIGN_RULES = {".txt": {"size": 3, "overlap": 2}, ".csv": {"size": 2}}


def judge_replying(text: str, tmp_path, **params) -> tuple[ChunkingJudge, ScriptedLLM]:
    backend = ScriptedLLM([text])
    return ChunkingJudge(ChunkingJudgeParams(**params), LLMClient(backend, tmp_path)), backend


def prompt_of(backend: ScriptedLLM) -> str:
    return backend.requests[-1][-1]["content"]


def test_the_allowlist_refuses_a_strategy_the_design_does_not_allow(tmp_path):
    judge, backend = judge_replying(reply("markdown", {"chunk_size": 800, "chunk_overlap": 100}), tmp_path,
                                    strategies=DESIGN_STRATEGIES, default={"type": "recursive"})
    spec, judgement = judge.decide(doc(PLAIN, "minutes.txt"))
    assert spec == chunkers.resolve("recursive")  # the fallback
    assert judgement.fell_back and not judgement.valid
    assert judgement.error == "chunker 'markdown' is not one of the allowed chunkers: recursive, sentence, token"
    # The prompt offers only the allowed chunkers.
    listed = prompt_of(backend).split("Chunkers:\n")[1].split("\n\n")[0]
    offered = [line[2:].split(":")[0] for line in listed.splitlines()]
    assert offered == DESIGN_STRATEGIES


def test_an_allowed_strategy_is_used(tmp_path):
    judge, _ = judge_replying(reply("token", {"chunk_size": 128, "chunk_overlap": 16}), tmp_path,
                              strategies=DESIGN_STRATEGIES)
    spec, judgement = judge.decide(doc(PLAIN, "minutes.md"))
    assert spec == chunkers.resolve({"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}})
    assert judgement.valid and not judgement.fell_back


def test_without_an_allowlist_every_choosable_chunker_is_offered_as_before(tmp_path):
    judge, _ = judge_replying(reply("markdown"), tmp_path)
    assert judge.allowed_chunkers() == [name for name in judge_choosable_chunkers() if name != "semantic"]


@pytest.mark.parametrize(("strategies", "message"), [
    (["recursive", "paragraphs"], "strategies ['paragraphs'] are not chunkers the judge can choose. Valid chunkers:"),
    (["llm_semantic"], "strategies ['llm_semantic'] are not chunkers the judge can choose"),
    ([], "strategies"),
])
def test_an_unknown_strategy_is_a_one_line_config_error_naming_it(strategies, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")) as error:
        STAGES.validate_params("chunking", {"mode": "llm", "strategies": strategies})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("show", [False, True])
def test_the_prompt_carries_the_file_name_only_when_asked(tmp_path, show):
    judge, backend = judge_replying(reply("recursive"), tmp_path, show_file_name=show)
    judge.decide(doc(PLAIN, "minutes-2020.txt"))
    prompt = prompt_of(backend)
    assert ("File name: minutes-2020.txt\nDocument:\n" in prompt) is show
    assert ("minutes-2020" in prompt) is show


# (reply's chunker, its params, the document's file, the spec the judge returns): hand-computed
# from .txt x3 size / x2 overlap and .csv x2 size.
SIZE_TABLE = [
    ("recursive", {"chunk_size": 400, "chunk_overlap": 50}, "notes.txt", {"chunk_size": 1200, "chunk_overlap": 100}),
    ("recursive", {"chunk_size": 400, "chunk_overlap": 50}, "table.csv", {"chunk_size": 800, "chunk_overlap": 50}),
    ("recursive", {"chunk_size": 400, "chunk_overlap": 50}, "TABLE.CSV", {"chunk_size": 800, "chunk_overlap": 50}),
    ("recursive", {"chunk_size": 400, "chunk_overlap": 50}, "guide.md", {"chunk_size": 400, "chunk_overlap": 50}),
    ("token", {"chunk_size": 100, "chunk_overlap": 15}, "notes.txt", {"chunk_size": 300, "chunk_overlap": 30}),
    # The chunker's own defaults (recursive 1,000 / 200) are what the rule scales.
    ("recursive", {}, "notes.txt", {"chunk_size": 3000, "chunk_overlap": 400}),
    ("sentence", {"chunk_size": 333, "chunk_overlap": 33}, "data.csv", {"chunk_size": 666, "chunk_overlap": 33}),
]


@pytest.mark.parametrize(("chunker", "params", "file_name", "expected"), SIZE_TABLE)
def test_size_rules_scale_the_chosen_size_by_file_type(tmp_path, chunker, params, file_name, expected):
    judge, _ = judge_replying(reply(chunker, params), tmp_path, size_rules=DESIGN_RULES)
    spec, judgement = judge.decide(doc(PLAIN, file_name))
    assert spec.type == chunker and judgement.valid
    assert {name: spec.params[name] for name in expected} == expected
    rule = judgement.decision.get("size_rule")
    if expected == {name: chunkers.resolve({"type": chunker, "params": params}).params[name] for name in expected}:
        assert rule is None  # no rule for the type
    else:
        assert rule["applied"] and rule["suffix"] == file_name[file_name.rindex("."):].lower()


def test_a_size_rule_on_a_chunker_without_a_size_is_recorded_not_applied(tmp_path):
    judge, _ = judge_replying(reply("code"), tmp_path, size_rules=DESIGN_RULES)
    spec, judgement = judge.decide(doc(PLAIN, "notes.txt"))
    assert spec == chunkers.resolve("code")
    assert judgement.decision["size_rule"]["applied"] is False
    assert judgement.decision["size_rule"]["reason"] == "chunker 'code' has no chunk_size"


def test_a_scaled_size_the_chunker_refuses_falls_back(tmp_path):
    judge, _ = judge_replying(reply("token", {"chunk_size": 4000, "chunk_overlap": 100}), tmp_path,
                              size_rules=DESIGN_RULES, default={"type": "recursive", "params": {"chunk_size": 500,
                                                                                                "chunk_overlap": 50}})
    spec, judgement = judge.decide(doc(PLAIN, "notes.txt"))  # 12,000 tokens > the token chunker's 8,192
    assert spec == chunkers.resolve({"type": "recursive", "params": {"chunk_size": 500, "chunk_overlap": 50}})
    assert judgement.fell_back and not judgement.valid and "chunk_size" in judgement.error


def test_the_heuristic_choice_is_scaled_too():
    judge = ChunkingJudge(ChunkingJudgeParams(mode="heuristic", size_rules=DESIGN_RULES))
    spec, judgement = judge.decide(doc(PLAIN, "minutes.txt"))
    assert spec == chunkers.resolve({"type": "recursive", "params": {"chunk_size": 3000, "chunk_overlap": 400}})
    assert judgement.decision["size_rule"]["before"]["chunk_size"] == 1000


def test_the_fallback_and_the_judge_off_baseline_are_never_scaled(tmp_path):
    baseline = {"type": "recursive", "params": {"chunk_size": 500, "chunk_overlap": 50}}
    off = ChunkingJudge(ChunkingJudgeParams(mode="off", size_rules=DESIGN_RULES, default=baseline))
    assert off.decide(doc(PLAIN, "notes.txt")) == (chunkers.resolve(baseline), None)
    judge, _ = judge_replying("not json", tmp_path, size_rules=DESIGN_RULES, default=baseline)
    spec, judgement = judge.decide(doc(PLAIN, "notes.txt"))
    assert spec == chunkers.resolve(baseline) and judgement.fell_back


@pytest.mark.parametrize("rules", [{"txt": {"size": 3}}, {".TXT": {"size": 3}}, {".txt": {"size": 0}},
                                   {".txt": {"size": 3, "width": 2}}])
def test_a_bad_size_rule_is_a_config_error(rules):
    with pytest.raises(ConfigError, match="size_rules"):
        STAGES.validate_params("chunking", {"mode": "llm", "size_rules": rules})


def test_options_at_their_default_leave_the_spec_and_decision_key_unchanged(tmp_path):
    plain = STAGES.resolve({"type": "chunking", "params": {"mode": "llm"}})
    explicit = STAGES.resolve({"type": "chunking", "params": {"mode": "llm", "strategies": None,
                                                              "show_file_name": False, "size_rules": {}}})
    assert explicit == plain
    judge, _ = judge_replying(reply("recursive"), tmp_path)
    with_defaults, _ = judge_replying(reply("recursive"), tmp_path, strategies=None, size_rules={})
    assert judge.decision_key(doc(PLAIN)) == with_defaults.decision_key(doc(PLAIN))
    designed, _ = judge_replying(reply("recursive"), tmp_path, strategies=DESIGN_STRATEGIES)
    assert designed.decision_key(doc(PLAIN)) != judge.decision_key(doc(PLAIN))


@pytest.mark.integration
def test_real_local_model_with_the_design_options_chooses_an_allowed_scaled_spec_or_falls_back(tmp_path):
    from ragkit.llms import llms

    backend = llms.build({"type": "local"})
    judge = ChunkingJudge(ChunkingJudgeParams(sample_chars=600, max_tokens=60, strategies=DESIGN_STRATEGIES,
                                              show_file_name=True, size_rules=DESIGN_RULES,
                                              default={"type": "recursive", "params": {"chunk_size": 500,
                                                                                        "chunk_overlap": 50}}),
                          LLMClient(backend, tmp_path))
    spec, judgement = judge.decide(doc(PLAIN, "minutes.txt"))
    assert judgement.raw_reply is not None
    if judgement.fell_back:  # an unusable reply: the judge-off chunker, unscaled, and the reason
        assert spec == chunkers.resolve({"type": "recursive", "params": {"chunk_size": 500, "chunk_overlap": 50}})
        assert judgement.error and not judgement.valid
    else:  # an allowed chunker, its size tripled for a .txt file
        assert spec.type in DESIGN_STRATEGIES and judgement.valid
        rule = judgement.decision["size_rule"]
        assert rule["applied"] and spec.params["chunk_size"] == round(rule["before"]["chunk_size"] * 3)


# The judges design (issue 43): missing sizes filled as 500 / 50, token sizes in characters / 4,
# the recursive splitter's per-type rules wherever it cuts (judge off, fallback, chosen).
FILE_TYPES = {".txt": {"size": 3, "overlap": 2, "separators": ["\n\n", "\n", " ", ""]},
              ".csv": {"size": 2, "separators": ["\n", ",", ""]}}
DEFAULT = {"type": "recursive", "params": {"chunk_size": 500, "chunk_overlap": 50, "file_types": FILE_TYPES}}


@pytest.mark.parametrize(("chunker", "params", "expected"), [
    ("recursive", {}, {"chunk_size": 500, "chunk_overlap": 50}),
    ("recursive", {"chunk_size": 800}, {"chunk_size": 800, "chunk_overlap": 50}),
    ("token", {}, {"chunk_size": 125, "chunk_overlap": 12}),  # 500 // 4, 50 // 4
    ("token", {"chunk_size": 1000, "chunk_overlap": 100}, {"chunk_size": 250, "chunk_overlap": 25}),
    ("markdown", {}, {"chunk_size": 500, "chunk_overlap": 50}),
])
def test_missing_sizes_are_the_designs_500_50_and_token_sizes_are_divided_by_4(tmp_path, chunker, params, expected):
    judge, _ = judge_replying(reply(chunker, params), tmp_path, strategies=["recursive", "token", "markdown"],
                              fill_size=500, fill_overlap=50, token_divisor=4)
    spec, judgement = judge.decide(doc(PLAIN, "notes.md"))
    assert spec.type == chunker and {k: spec.params[k] for k in expected} == expected
    assert not judgement.fell_back


def test_without_fill_sizes_the_chunkers_own_defaults_stay(tmp_path):
    judge, _ = judge_replying(reply("token"), tmp_path)
    spec, _ = judge.decide(doc(PLAIN))
    assert (spec.params["chunk_size"], spec.params["chunk_overlap"]) == (256, 32)


@pytest.mark.parametrize("choice", ["recursive", "token"])
def test_a_chosen_recursive_splitter_keeps_the_defaults_file_type_rules(tmp_path, choice):
    judge, _ = judge_replying(reply(choice), tmp_path, default=DEFAULT, fill_size=500, fill_overlap=50)
    spec, _ = judge.decide(doc(PLAIN))
    assert ("file_types" in spec.params) is (choice == "recursive")


def split_sizes(spec: dict, file_name: str, text: str) -> list[int]:
    chunker = chunkers.build(spec)
    return [len(node.get_content()) for node in chunker.get_nodes_from_documents([doc(text, file_name)])]


@pytest.mark.parametrize(("file_name", "largest"), [("notes.txt", 1500), ("table.csv", 1000), ("notes.md", 500)])
def test_the_recursive_splitter_cuts_each_file_type_by_its_rule(file_name, largest):
    sizes = split_sizes(DEFAULT, file_name, PLAIN)
    assert max(sizes) <= largest and max(sizes) > largest - 100


def test_a_csv_is_cut_between_rows():
    rows = "".join(f"{n},cats,purr,{n * 7}\n" for n in range(200))
    chunker = chunkers.build(DEFAULT)
    texts = [node.get_content() for node in chunker.get_nodes_from_documents([doc(rows, "t.csv")])]
    assert len(texts) > 1
    assert all(re.fullmatch(r"\d+,cats,purr,\d+", line) for text in texts for line in text.strip().split("\n"))


def test_file_type_rules_are_validated():
    with pytest.raises(ConfigError, match="lower-case file suffixes"):
        chunkers.resolve({"type": "recursive", "params": {"file_types": {"TXT": {}}}})
    with pytest.raises(ConfigError, match="must be smaller"):
        chunkers.resolve({"type": "recursive", "params": {"chunk_size": 100, "chunk_overlap": 50,
                                                          "file_types": {".txt": {"overlap": 3}}}})
