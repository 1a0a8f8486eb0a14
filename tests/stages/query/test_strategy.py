"""Strategy judge and the switchable retriever: the heuristic rules as a table, llm replies on a
scripted model, one real-model run, and switching over a real LanceDB index."""

from __future__ import annotations

import json

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.retrievers.switchable import SwitchableRetriever
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.query.strategy import StrategyJudge, StrategyParams, heuristic_choice
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()


@pytest.mark.unit
@pytest.mark.parametrize(("query", "strategy", "confidence"), [
    ('"spike protein" binding affinity', "bm25", 0.9),
    ("IL-6 levels in severe patients", "bm25", 0.9),
    ("ACE2 receptor expression", "bm25", 0.9),
    ("H1N1 pandemic", "bm25", 0.9),
    ("coronavirus symptoms", "bm25", 0.7),
    ("what is the incubation period of the new coronavirus in adults", "dense", 0.7),
    ("how is mers transmitted between people", "hybrid", 0.5),
])
def test_heuristic_rules(query, strategy, confidence):
    assert heuristic_choice(query)[:2] == (strategy, confidence)


@pytest.mark.unit
def test_heuristic_gives_way_to_an_allowed_strategy_and_records_each_choice():
    judge = StrategyJudge(StrategyParams(mode="heuristic", strategies=["dense", "hybrid"]))
    trace = JudgementLog()
    assert judge.choose("covid symptoms", trace) == "dense"
    (judgement,) = trace.judgements
    assert judgement.decision["confidence"] == 0.3 and "bm25 is not allowed" in judgement.decision["reason"]


@pytest.mark.unit
def test_off_chooses_nothing_and_records_nothing():
    trace = JudgementLog()
    assert StrategyJudge(StrategyParams(mode="off")).choose("q", trace) is None and trace.judgements == []


@pytest.mark.unit
@pytest.mark.parametrize(("reply", "chosen", "valid"), [
    (json.dumps({"strategy": "bm25", "confidence": 0.8, "reason": "a code"}), "bm25", True),
    (json.dumps({"strategy": "hybrid", "confidence": 0.5}), None, False),   # not among the allowed
    (json.dumps({"strategy": "sparse", "confidence": 0.5}), None, False),   # not a strategy
    (json.dumps({"strategy": "dense", "confidence": 1.5}), None, False),    # confidence out of range
    ("dense please", None, False),
    (LLMError("timed out"), None, False),
])
def test_llm_replies(tmp_path, reply, chosen, valid):
    backend = ScriptedLLM([reply])
    judge = StrategyJudge(StrategyParams(mode="llm", strategies=["dense", "bm25"]), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    assert judge.choose("IL-6 levels", trace) == chosen
    (judgement,) = trace.judgements
    assert judgement.valid is valid and judgement.fell_back is (not valid)
    assert "Allowed: dense, bm25" in backend.requests[0][-1]["content"]


@pytest.mark.unit
def test_strategies_must_be_distinct_and_known():
    from ragkit.errors import ConfigError

    with pytest.raises(ConfigError, match="must not repeat"):
        STAGES.validate_params("strategy", {"strategies": ["dense", "dense"]})
    with pytest.raises(ConfigError, match="strategies"):
        STAGES.validate_params("strategy", {"strategies": ["sparse"]})


class Named(BaseRetriever):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=self.name, text=query_bundle.query_str), score=1.0)]


@pytest.mark.unit
def test_switchable_delegates_to_the_current_retriever_and_resets():
    switchable = SwitchableRetriever({"dense": Named("dense"), "bm25": Named("bm25")}, default="dense")
    assert switchable.retrieve("q")[0].node.node_id == "dense"
    switchable.use("bm25")
    assert switchable.current == "bm25" and switchable.retrieve("q")[0].node.node_id == "bm25"
    switchable.reset()
    assert switchable.current == "dense" and switchable.names == ["dense", "bm25"]
    with pytest.raises(ValueError, match=r"no retrieval strategy 'hybrid'\. Valid strategies: dense, bm25"):
        switchable.use("hybrid")
    with pytest.raises(ValueError, match="default strategy"):
        SwitchableRetriever({"dense": Named("dense")}, default="bm25")


@pytest.mark.integration
def test_switching_over_a_real_index_returns_each_retrievers_own_results(tmp_path, minilm_embedder):
    import pandas as pd

    from ragkit.artefacts.index import IndexStore
    from ragkit.retrievers import retrievers

    texts = ["Cats purr when content.", "IL-6 rises in severe COVID-19.", "Dogs bark at night.",
             "The ACE2 receptor binds the spike protein."]
    chunks = pd.DataFrame({
        "chunk_id": [f"c{i}" for i in range(4)], "doc_id": [f"d{i}" for i in range(4)], "text": texts,
        "embed_text": texts, "start_char": 0, "end_char": [len(t) for t in texts], "chunk_index": 0,
        "metadata": "{}", "text_sha": [str(i) for i in range(4)],
    })
    store = IndexStore(tmp_path / "lancedb")
    vectors = minilm_embedder.embed_texts(texts)
    store.build("ix", chunks, vectors, lambda: None)
    index = store.open("ix")
    built = {name: retrievers.build({"type": name, "params": {"top_k": 3}}, index=index,
                                             embedder=minilm_embedder) for name in ("dense", "bm25", "hybrid")}
    switchable = SwitchableRetriever(built, default="dense")
    for name, retriever in built.items():
        switchable.use(name)
        through = [(n.node.node_id, n.score) for n in switchable.retrieve("IL-6 in COVID-19")]
        direct = [(n.node.node_id, n.score) for n in retriever.retrieve("IL-6 in COVID-19")]
        assert through == direct and through
    switchable.use("bm25")
    assert switchable.retrieve("IL-6 in COVID-19")[0].node.node_id == "c1"  # the only chunk with the words


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_choice(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    trace = JudgementLog()
    chosen = StrategyJudge(StrategyParams(mode="llm"), client).choose("IL-6 levels in severe patients", trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None
    assert (chosen in ("dense", "bm25", "hybrid") and judgement.valid) or (chosen is None and judgement.fell_back)
