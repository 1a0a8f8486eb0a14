"""Cross-encoder rerank, the two-stage rerank and NLI groundedness through the real code path:
tiny random models saved to a temporary folder and loaded by sentence-transformers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.llms import LLMClient
from ragkit.local_models import ModelFolderError, cross_encoder_scores, entailment_label, entailment_probabilities
from ragkit.stages.answer.groundedness import GroundednessJudge, GroundednessParams
from ragkit.stages.base import JudgementLog
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams, build_prompt
from tests.factories import scripted_llm_class
from tests.tiny_models import save_tiny_model

pytestmark = pytest.mark.integration

QUERY = "why do cats purr"
TEXTS = ["cats purr when content", "the stock market fell", "dogs bark", "a cat sleep day", "the rate fell",
         "cats purr", "queue job retry", "what is the delay"]


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("cross-encoder")))


@pytest.fixture(scope="module")
def nli_model(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("nli"), ["contradiction", "entailment", "neutral"], seed=1))


def nodes(texts=TEXTS):
    return [NodeWithScore(node=TextNode(id_=f"c{i}", text=t, metadata={"title": f"Doc {i}", "breadcrumb": "Intro"}),
                          score=1.0 - i / 10) for i, t in enumerate(texts)]


def direct_scores(folder, texts):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(folder, device="cpu").predict([(QUERY, t) for t in texts])


def test_cross_encoder_scores_are_finite_repeatable_and_equal_the_model_called_directly(cross_encoder):
    scores = cross_encoder_scores(cross_encoder, QUERY, TEXTS)
    assert len(scores) == len(TEXTS) and all(math.isfinite(s) for s in scores)
    assert scores == cross_encoder_scores(cross_encoder, QUERY, TEXTS)
    assert np.allclose(scores, direct_scores(cross_encoder, TEXTS), atol=1e-6)
    assert len(set(np.round(scores, 6))) > 1  # the wide init gives scores that order the texts


def test_cross_encoder_rerank_keeps_top_n_in_the_models_order(cross_encoder):
    trace = JudgementLog()
    judge = RerankJudge(RerankJudgeParams(mode="cross_encoder", model_path=cross_encoder, top_n=3), trace=trace)
    kept = judge.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))
    scores = direct_scores(cross_encoder, TEXTS)
    expected = [f"c{i}" for i in sorted(range(len(TEXTS)), key=lambda i: -scores[i])[:3]]
    assert [n.node.node_id for n in kept] == expected
    assert np.allclose([n.score for n in kept], sorted(scores, reverse=True)[:3], atol=1e-6)
    (judgement,) = trace.judgements
    assert judgement.decision["method"] == "cross_encoder" and judgement.decision["kept"] == expected


ScriptedLLM = scripted_llm_class()


def test_two_stage_rerank_shows_the_llm_only_the_prefiltered_chunks(cross_encoder, tmp_path):
    backend = ScriptedLLM([json.dumps({"scores": [10, 90, 50, 0]})])
    trace = JudgementLog()
    params = RerankJudgeParams(mode="llm", model_path=cross_encoder, prefilter_n=4, top_n=2, batch_size=10,
                               show_source=True)
    judge = RerankJudge(params, LLMClient(backend, tmp_path), trace=trace)
    kept = judge.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))
    scores = direct_scores(cross_encoder, TEXTS)
    prefiltered = [f"c{i}" for i in sorted(range(len(TEXTS)), key=lambda i: -scores[i])[:4]]
    prefilter, llm = trace.judgements
    assert prefilter.decision["stage"] == "prefilter" and prefilter.decision["kept"] == prefiltered
    assert llm.decision["shown"] == prefiltered
    assert [n.node.node_id for n in kept] == [prefiltered[1], prefiltered[2]]  # scored 90 and 50
    prompt = backend.requests[0][-1]["content"]
    assert prompt.count("(Doc ") == 4 and "> Intro)" in prompt  # title and section of each chunk


def test_two_stage_with_a_bm25_prefilter_needs_no_model(tmp_path):
    backend = ScriptedLLM([json.dumps({"scores": [80, 20]})])
    trace = JudgementLog()
    params = RerankJudgeParams(mode="llm", prefilter="bm25", prefilter_n=2, top_n=1)
    kept = RerankJudge(params, LLMClient(backend, tmp_path), trace=trace).postprocess_nodes(
        nodes(), query_bundle=QueryBundle(QUERY))
    assert trace.judgements[0].decision["method"] == "bm25"
    assert set(trace.judgements[1].decision["shown"]) == {"c0", "c5"}  # the two chunks with "cats purr"
    assert len(kept) == 1


@pytest.mark.unit
def test_without_show_source_the_prompt_is_unchanged():
    plain = build_prompt(QUERY, nodes()[:2], 300)
    assert plain == build_prompt(QUERY, nodes()[:2], 300, show_source=False)
    assert "[1] cats purr when content\n[2] the stock market fell" in plain and "Doc" not in plain


@pytest.mark.unit
@pytest.mark.parametrize("params", [{"mode": "cross_encoder"}, {"mode": "llm", "prefilter_n": 15}])
def test_a_cross_encoder_without_model_path_is_a_clear_error(params):
    with pytest.raises(ValueError, match="model_path is required"):
        RerankJudgeParams(**params)


def test_a_missing_model_folder_is_named(tmp_path):
    with pytest.raises(ModelFolderError, match=r"model_path .*nowhere is not a folder"):
        cross_encoder_scores(str(tmp_path / "nowhere"), QUERY, TEXTS)


@pytest.mark.unit
@pytest.mark.parametrize(("labels", "expected"), [
    ({0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}, 1),
    ({0: "entailment", 1: "not_entailment"}, None),    # two labels contain "entail": ambiguous
    ({0: "LABEL_0"}, None),
])
def test_entailment_label_is_read_from_id2label(labels, expected):
    config = type("Config", (), {"id2label": labels})()
    if expected is None:
        with pytest.raises(ModelFolderError, match="not an NLI model"):
            entailment_label(config)
    else:
        assert entailment_label(config) == expected


def test_entailment_probabilities_are_a_softmax_column(nli_model):
    pairs = [("cats purr when content", "cats purr"), ("the market fell", "cats purr")]
    probabilities = entailment_probabilities(nli_model, pairs)
    from sentence_transformers import CrossEncoder

    direct = CrossEncoder(nli_model, device="cpu").predict(pairs, apply_softmax=True)
    assert np.allclose(probabilities, np.asarray(direct)[:, 1], atol=1e-5)
    assert all(0.0 < p < 1.0 for p in probabilities)


def test_a_cross_encoder_is_not_an_nli_model(cross_encoder):
    with pytest.raises(ModelFolderError, match="entailment"):
        entailment_probabilities(cross_encoder, [("a", "b")])


@pytest.mark.parametrize(("best", "verdict"), [(0.69, "unsupported"), (0.71, "supported")])
def test_nli_threshold_on_the_best_chunk(monkeypatch, best, verdict):
    from ragkit.stages.answer import groundedness

    # Two claims x two chunks: each claim's best chunk decides; hand-made probabilities.
    table = {("chunk one", "Cats purr when content."): 0.2, ("chunk two", "Cats purr when content."): best,
             ("chunk one", "Dogs bark at night here."): 0.9, ("chunk two", "Dogs bark at night here."): 0.1}
    monkeypatch.setattr(groundedness, "entailment_probabilities", lambda path, pairs: [table[p] for p in pairs])
    judge = GroundednessJudge(GroundednessParams(mode="nli", nli_model_path="unused"))
    score, judgement = judge.judge("q", "Cats purr when content. Dogs bark at night here.", ["chunk one", "chunk two"],
                                   JudgementLog())
    first, second = judgement.decision["claims"]
    assert (first["verdict"], first["entailment"], first["best_chunk"]) == (verdict, best, 2)
    assert (second["verdict"], second["best_chunk"]) == ("supported", 1)
    assert score == (2 if verdict == "supported" else 1) / 2


def test_nli_groundedness_through_the_real_model(nli_model):
    trace = JudgementLog()
    judge = GroundednessJudge(GroundednessParams(mode="nli", nli_model_path=nli_model, entailment_threshold=0.0))
    score, judgement = judge.judge("q", "Cats purr when content. The stock market fell.", TEXTS[:3], trace)
    # Threshold 0: any probability above 0 supports, so both claims must be supported.
    assert score == 1.0 and judgement.valid and len(judgement.decision["claims"]) == 2
    strict = GroundednessJudge(GroundednessParams(mode="nli", nli_model_path=nli_model, entailment_threshold=1.0))
    assert strict.judge("q", "Cats purr when content.", TEXTS[:3], JudgementLog())[0] == 0.0


@pytest.mark.unit
def test_nli_mode_needs_its_model_folder_and_an_llm_only_to_split_claims():
    with pytest.raises(ValueError, match="nli_model_path"):
        GroundednessParams(mode="nli")
    split = GroundednessParams(mode="nli", nli_model_path="x", claim_split="llm")
    with pytest.raises(ValueError, match="claim_split llm needs an LLM client"):
        GroundednessJudge(split)
    assert GroundednessJudge(GroundednessParams(mode="nli", nli_model_path="x")).llm is None
    # The plan gives the judge its role's model only when it asks the LLM (run ids of nli runs stay).
    assert GroundednessJudge.calls_llm(split.model_dump()) and GroundednessJudge.calls_llm({"mode": "llm"})
    assert not GroundednessJudge.calls_llm({"mode": "nli", "claim_split": "heuristic"})


@pytest.mark.unit
def test_nli_checks_the_claims_the_llm_splits_and_falls_back_to_the_rule(monkeypatch, tmp_path):
    from ragkit.stages.answer import groundedness

    seen: list[tuple[str, str]] = []

    def probabilities(path, pairs):
        seen.extend(pairs)
        return [0.9 if "purr" in claim else 0.1 for _, claim in pairs]

    monkeypatch.setattr(groundedness, "entailment_probabilities", probabilities)
    backend = ScriptedLLM([json.dumps({"claims": ["Cats purr.", "Cats fly south."]}), '{"claims": [}'])
    judge = GroundednessJudge(GroundednessParams(mode="nli", nli_model_path="unused", claim_split="llm"),
                              LLMClient(backend, tmp_path))
    answer = "Cats purr and fly south in winter, as all cats do."
    score, judgement = judge.judge("q", answer, ["chunk one"], JudgementLog())
    assert [c["claim"] for c in judgement.decision["claims"]] == ["Cats purr.", "Cats fly south."] and score == 0.5
    assert seen == [("chunk one", "Cats purr."), ("chunk one", "Cats fly south.")] and len(backend.requests) == 1
    assert judgement.decision["claim_split"] == "llm" and "split_fell_back" not in judgement.decision
    # An unparseable split is recorded and the rule's sentence is checked instead.
    score, judgement = judge.judge("q", answer + " Dogs bark.", ["chunk one"], JudgementLog())
    assert judgement.decision["split_fell_back"] and judgement.decision["split_error"]
    assert judgement.decision["split_reply"] == '{"claims": [}'
    assert [c["claim"] for c in judgement.decision["claims"]] == [answer] and score == 1.0


def test_nli_with_llm_claim_split_on_the_embedded_model(nli_model, local_backend, tmp_path):
    """Mechanics: the real LLM splits (or its unusable reply is recorded and the rule splits), the
    real NLI model checks every claim."""
    judge = GroundednessJudge(GroundednessParams(mode="nli", nli_model_path=nli_model, claim_split="llm",
                                                 entailment_threshold=0.0), LLMClient(local_backend, tmp_path))
    score, judgement = judge.judge("q", "Cats purr when content. The stock market fell.", TEXTS[:3], JudgementLog())
    decision = judgement.decision
    assert decision["claim_split"] == "llm" and (decision.get("split_reply") is not None or decision["split_error"])
    if decision.get("split_fell_back"):
        assert decision["split_error"] and [c["claim"] for c in decision["claims"]] == [
            "Cats purr when content.", "The stock market fell."]
    assert decision["claims"] and all("entailment" in c for c in decision["claims"])
    assert score == 1.0  # threshold 0: every claim the NLI model sees is supported
