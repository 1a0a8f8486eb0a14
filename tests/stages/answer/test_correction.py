"""Hallucination correction: the tier rule, the exact sequence of steps, the stopping rule and the
best attempt kept, with scripted steps; then the real groundedness judge and generator on the
embedded model."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.stages.answer.correction import CorrectionAttempt, HallucinationCorrector, best_attempt, refined_query
from ragkit.stages.answer.generator import Answer
from ragkit.stages.answer.groundedness import GroundednessParams
from ragkit.stages.base import Judgement, JudgementLog
from ragkit.stages.question import AnswerActions, QuestionContext

pytestmark = pytest.mark.unit

QUERY = "why do cats purr"


def nodes(*ids: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text=f"{i} text"), score=0.5) for i in ids]


def graded(claims: dict[str, bool]) -> Judgement:
    """A groundedness judgement with these claims' verdicts."""
    checks = [{"claim": c, "verdict": "supported" if ok else "unsupported"} for c, ok in claims.items()]
    return Judgement("groundedness", QUERY, {"claims": checks})


class Script:
    """Scripted steps: each check returns the next score; every call is logged in order."""

    def __init__(self, scores: list[float | None]) -> None:
        self.scores = list(scores)
        self.calls: list[tuple] = []

    def regenerate(self, chunks, unsupported):
        self.calls.append(("regenerate", [n.node.node_id for n in chunks], list(unsupported)))
        return Answer(f"answer {len(self.calls)}", [], "prompt", valid=True)

    def re_retrieve(self, query):
        self.calls.append(("re_retrieve", query))
        return nodes("fresh")

    def check(self, answer, chunks):
        score = self.scores.pop(0)
        self.calls.append(("check", answer.text, score))
        return score, graded({"Cats bark loudly.": False})


def run(scores, first_score, *, quality=None, re_retrieve=True, switch=None, strategy=None, **params):
    script = Script(scores)
    corrector = HallucinationCorrector(GroundednessParams(**params))
    first = CorrectionAttempt(Answer("first", [], "p", valid=True), nodes("a", "b"), first_score,
                    graded({"Cats purr.": True, "Cats bark loudly.": False}))
    trace = JudgementLog()
    actions = AnswerActions(script.regenerate, script.re_retrieve if re_retrieve else None, switch, strategy)
    result = corrector.run(QuestionContext(QUERY, QUERY, log=trace), first, actions, script.check, quality)
    return result, script.calls, trace


@pytest.mark.parametrize(("on_fail", "score", "quality", "tier"), [
    ("off", 0.1, None, "accept"),
    ("regenerate", 0.8, None, "accept"),
    ("regenerate", 0.79, None, "regenerate"),
    ("regenerate", 0.2, None, "regenerate"),        # regenerate-only never re-retrieves
    ("re_retrieve", 0.6, None, "regenerate"),
    ("re_retrieve", 0.59, None, "re_retrieve"),
    ("re_retrieve", 0.7, 0.5, "re_retrieve"),       # poor retrieval sends the middle tier back to search
    ("re_retrieve", 0.7, 0.6, "regenerate"),
    ("re_retrieve", 0.9, 0.1, "accept"),            # a supported answer is kept whatever the retrieval
    ("re_retrieve", None, None, "accept"),          # no score: nothing to act on
])
def test_tier_rule(on_fail, score, quality, tier):
    assert HallucinationCorrector(GroundednessParams(on_fail=on_fail)).tier(score, quality) == tier


def test_an_accepted_answer_makes_no_call():
    result, calls, trace = run([], 0.9, on_fail="re_retrieve")
    assert calls == [] and trace.judgements == [] and result.kept == 0 and result.answer.text == "first"


def test_regenerate_then_accept_lists_the_unsupported_claims():
    result, calls, trace = run([0.85], 0.7, on_fail="regenerate")
    assert calls == [("regenerate", ["a", "b"], ["Cats bark loudly."]), ("check", "answer 1", 0.85)]
    assert (result.kept, result.score, result.answer.text) == (1, 0.85, "answer 1")
    (judgement,) = trace.judgements
    assert judgement.judge == "correction"
    expected = {"round": 1, "tier": "regenerate", "score_before": 0.7, "score_after": 0.85, "kept": 1}
    assert {key: judgement.decision[key] for key in expected} == expected


def test_low_score_re_retrieves_with_the_refined_query_then_regenerates_from_the_new_chunks():
    result, calls, trace = run([0.9], 0.3, on_fail="re_retrieve")
    assert calls == [("re_retrieve", "why do cats purr bark loudly"),
                     ("regenerate", ["fresh"], ["Cats bark loudly."]), ("check", "answer 2", 0.9)]
    assert [n.node.node_id for n in result.nodes] == ["fresh"] and result.kept == 1
    assert trace.judgements[0].decision["refined_query"] == "why do cats purr bark loudly"


def test_stops_after_max_corrections_and_keeps_the_best_attempt():
    result, calls, trace = run([0.65, 0.5, 0.7], 0.4, on_fail="re_retrieve", max_corrections=2)
    # round 1 (0.4 < 0.6): re-retrieve; round 2 (0.65): regenerate; then the limit.
    assert [call[0] for call in calls] == ["re_retrieve", "regenerate", "check", "regenerate", "check"]
    assert result.kept == 1 and result.score == 0.65
    assert len(trace.judgements) == 2 and trace.judgements[-1].decision["attempts"] == [
        {"score": 0.4, "chunks": 2}, {"score": 0.65, "chunks": 1}, {"score": 0.5, "chunks": 1}]


def test_a_worse_correction_keeps_the_first_answer():
    result, _, _ = run([0.5], 0.7, on_fail="regenerate", max_corrections=1)
    assert (result.kept, result.answer.text, result.score) == (0, "first", 0.7)


def test_a_correction_without_a_score_ends_the_loop_and_ranks_last():
    result, calls, _trace = run([None, 0.99], 0.5, on_fail="regenerate")
    assert [call[0] for call in calls] == ["regenerate", "check"]
    assert result.kept == 0 and result.answer.text == "first"


def test_web_results_cannot_be_searched_again_so_the_low_tier_regenerates():
    _, calls, trace = run([0.9], 0.2, on_fail="re_retrieve", re_retrieve=False)
    assert [call[0] for call in calls] == ["regenerate", "check"]
    assert trace.judgements[0].decision["tier"] == "regenerate"


def test_a_first_answer_without_a_score_is_not_corrected():
    result, calls, trace = run([0.9], None, on_fail="re_retrieve", quality=0.1)
    assert calls == [] and trace.judgements == [] and (result.kept, result.score) == (0, None)


def test_poor_retrieval_re_retrieves_a_middle_score_then_later_rounds_go_by_the_score_alone():
    _, calls, trace = run([0.7, 0.9], 0.7, on_fail="re_retrieve", quality=0.4)
    # round 1: 0.7 would regenerate, but the gate scored the retrieval 0.4 (< 0.6): search again.
    # round 2: the new chunks have no gate score, and 0.7 regenerates.
    assert calls == [("re_retrieve", "why do cats purr bark loudly"),
                     ("regenerate", ["fresh"], ["Cats bark loudly."]), ("check", "answer 2", 0.7),
                     ("regenerate", ["fresh"], ["Cats bark loudly."]), ("check", "answer 4", 0.9)]
    assert [j.decision["tier"] for j in trace.judgements] == ["re_retrieve", "regenerate"]


def test_an_abstained_correction_is_not_checked_and_ranks_last():
    script = Script([0.9])
    first = CorrectionAttempt(Answer("first", [], "p", valid=True), nodes("a"), 0.3,
                              graded({"Cats bark loudly.": False}))
    actions = AnswerActions(lambda chunks, claims: Answer("Not in the documents.", [], "", valid=True, abstained=True),
                            lambda query: [])
    result = HallucinationCorrector(GroundednessParams(on_fail="re_retrieve")).run(
        QuestionContext(QUERY, QUERY), first, actions, script.check, None)
    assert script.calls == [] and result.kept == 0 and result.answer.text == "first"


def test_the_real_generator_lists_the_unsupported_claims_and_the_real_judge_checks_again(tmp_path):
    """Scripted replies through the real Generator and GroundednessJudge: the exact LLM calls of one
    regenerate round, the feedback block in the regenerate prompt, and the new answer kept."""
    from ragkit.llms import LLMClient
    from ragkit.stages.answer.generator import Generator, GeneratorParams
    from ragkit.stages.answer.groundedness import GroundednessJudge
    from tests.factories import scripted_llm_class

    backend = scripted_llm_class()(["Cats purr when they are content [1].",
                                    '{"supported": true, "evidence": "purr when content"}'])
    client = LLMClient(backend, tmp_path)
    params = GroundednessParams(on_fail="regenerate")
    judge = GroundednessJudge(params, client)
    gen = Generator(GeneratorParams(constrained=False), client)
    context = [NodeWithScore(node=TextNode(id_="cats", text="Cats purr when they are content."), score=0.5)]
    first = CorrectionAttempt(Answer("Cats purr when content. Cats bark at night.", [], "p", valid=True), context, 0.5,
                    graded({"Cats purr when content.": True, "Cats bark at night.": False}))
    trace = JudgementLog()
    result = HallucinationCorrector(params).run(
        QuestionContext(QUERY, QUERY, log=trace), first,
        AnswerActions(lambda chunks, claims: gen.generate(QUERY, chunks, trace, feedback=claims)),
        lambda answer, chunks: judge.judge(QUERY, answer.text, [n.node.get_content() for n in chunks], trace), None)
    prompts = [messages[-1]["content"] for messages in backend.requests]
    assert len(prompts) == 2
    assert ("not supported by the sources; do not repeat them unless a source states them:\n"
            "- Cats bark at night.\n") in prompts[0] and "[1] Cats purr when they are content." in prompts[0]
    assert "Claim: Cats purr when they are content." in prompts[1]
    assert [j.judge for j in trace.judgements] == ["generator", "groundedness", "correction"]
    assert (result.kept, result.score, result.answer.citations) == (1, 1.0, ["cats"])
    assert trace.judgements[-1].decision["attempts"] == [{"score": 0.5, "chunks": 1}, {"score": 1.0, "chunks": 1}]


@pytest.mark.parametrize(("scores", "kept"), [
    ([0.5, 0.5], 0), ([0.5, 0.6, 0.6], 1), ([None, 0.1], 1), ([None, None], 0), ([0.2, None, 0.3], 2),
])
def test_best_attempt(scores, kept):
    attempts = [CorrectionAttempt(Answer("a", [], "p", valid=True), [], score, None) for score in scores]
    assert best_attempt(attempts) == kept


def test_refined_query_adds_each_new_content_word_once():
    assert refined_query("Why do  cats purr?", ["Cats purr at 25 Hz.", "Purring heals bones."]) == \
        "Why do cats purr? purring heals bones"  # "25" and "hz" are too short to search for


def test_tiers_must_be_ordered():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="regenerate_at"):
        GroundednessParams(accept_at=0.5, regenerate_at=0.7)


@pytest.mark.integration
def test_real_local_model_correction_round_is_recorded(tmp_path):
    """A first answer graded 0.5 (one claim unsupported) is regenerated by the real generator with
    that claim listed, and checked again by the real groundedness judge."""
    from ragkit.llms import LLMClient, llms
    from ragkit.stages.answer.generator import Generator, GeneratorParams
    from ragkit.stages.answer.groundedness import GroundednessJudge

    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    params = GroundednessParams(mode="llm", on_fail="regenerate", max_corrections=1, max_claims=2)
    judge = GroundednessJudge(params, client)
    gen = Generator(GeneratorParams(constrained=False, max_tokens=40, chunk_chars=150), client)
    context = [NodeWithScore(node=TextNode(id_="cats", text="Cats purr when they are content and when hurt."),
                             score=0.5)]
    answer = Answer("Cats purr when content. Cats are made of glass.", [], "p", valid=True)
    first = CorrectionAttempt(answer, context, 0.5,
                              graded({"Cats purr when content.": True, "Cats are made of glass.": False}))
    trace = JudgementLog()

    def check(candidate, chunks):
        return judge.judge(QUERY, candidate.text, [n.node.get_content() for n in chunks], trace)

    result = HallucinationCorrector(params).run(
        QuestionContext(QUERY, QUERY, log=trace), first,
        AnswerActions(lambda chunks, claims: gen.generate(QUERY, chunks, trace, feedback=claims)), check, None)
    generated = trace.judgements[0]
    assert generated.judge == "generator" and generated.decision["feedback"] == ["Cats are made of glass."]
    assert "- Cats are made of glass." in generated.decision["prompt"]
    judges_seen = [j.judge for j in trace.judgements]
    regenerated_text = bool(generated.decision.get("answer"))
    assert judges_seen == (["generator", "groundedness", "correction"] if regenerated_text
                           else ["generator", "correction"])
    correction = trace.judgements[-1].decision
    assert correction["tier"] == "regenerate" and correction["score_before"] == 0.5
    assert result.kept == (1 if (correction["score_after"] or -1) > 0.5 else 0)


# The design's tiers at 0.8 / 0.6, values just above and below each threshold.
@pytest.mark.parametrize(("score", "tier"), [
    (0.81, "accept"), (0.8, "accept"), (0.79, "regenerate"), (0.61, "regenerate"), (0.6, "regenerate"),
    (0.59, "re_retrieve"), (0.0, "re_retrieve"),
])
def test_design_tiers_proceed_regenerate_re_retrieve(score, tier):
    params = GroundednessParams(on_fail="re_retrieve", accept_at=0.8, regenerate_at=0.6, re_retrieve_strategy="next")
    assert HallucinationCorrector(params).tier(score, None) == tier


def test_the_low_tier_re_retrieves_with_the_next_strategy_each_round_and_the_middle_tier_does_not_switch():
    switched: list[str] = []
    # 0.5 -> re-retrieve (switch hybrid -> dense), 0.55 -> re-retrieve (dense -> bm25), 0.7 -> regenerate
    # (no switch), then max_corrections (3) ends it.
    result, calls, trace = run([0.55, 0.7, 0.75], 0.5, on_fail="re_retrieve", re_retrieve_strategy="next",
                               max_corrections=3, switch=switched.append, strategy="hybrid")
    assert switched == ["dense", "bm25"]
    assert [call[0] for call in calls] == ["re_retrieve", "regenerate", "check", "re_retrieve", "regenerate", "check",
                                           "regenerate", "check"]
    rounds = [j.decision for j in trace.judgements]
    assert [(d["tier"], d.get("strategy_before"), d.get("strategy")) for d in rounds] == [
        ("re_retrieve", "hybrid", "dense"), ("re_retrieve", "dense", "bm25"), ("regenerate", None, None)]
    assert result.kept == 3 and result.score == 0.75


@pytest.mark.parametrize(("choice", "strategy", "switched"), [("same", "dense", []), ("bm25", "dense", ["bm25"]),
                                                               ("next", "bm25", ["hybrid"])])
def test_re_retrieve_strategy_choices(choice, strategy, switched):
    log: list[str] = []
    _, _, trace = run([0.9], 0.3, on_fail="re_retrieve", re_retrieve_strategy=choice, switch=log.append,
                      strategy=strategy)
    assert log == switched
    assert trace.judgements[0].decision.get("strategy") == (switched[0] if switched else None)


def test_a_strategy_change_without_a_switchable_retriever_is_recorded_and_searches_as_before():
    result, calls, trace = run([0.9], 0.3, on_fail="re_retrieve", re_retrieve_strategy="next")
    decision = trace.judgements[0].decision
    assert calls[0] == ("re_retrieve", "why do cats purr bark loudly") and decision["strategy"] is None
    assert decision["strategy_note"] == "no strategy to switch between in this pipeline" and result.score == 0.9
