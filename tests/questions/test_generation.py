"""Question generation with a rule-following fake LLM: balance, exact spans, every drop reason,
duplicates, language, and a dry run that counts the calls the run then makes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragkit.corpus.model import make_document
from ragkit.llms import LLMClient
from ragkit.questions import load_dataset_corpus, load_question_set, validate_against_corpus
from ragkit.questions.dedup import find_duplicates
from ragkit.questions.generation import GenerationParams, dry_run_counts, generate_questions, plan_generation, write_set
from ragkit.questions.generation.generate import find_templates
from ragkit.questions.generation.replies import clean_question
from ragkit.questions.generation.sampling import plan_slots
from tests.questions.generation_helpers import (
    distinct_question,
    english_documents,
    reply_copying,
    rule_llm,
    sectioned_document,
)

pytestmark = pytest.mark.unit


def run(documents, rule, **params):
    llm = rule_llm(rule)
    result = generate_questions(documents, GenerationParams(**params), LLMClient(llm, None))
    return result, llm


def test_questions_are_balanced_across_documents_within_one():
    documents = english_documents(count=6)
    result, _ = run(documents, reply_copying(distinct_question), n=23, types=["factoid"], seed=3)
    counts = Counter(row["doc_id"] for row in result.rows)
    assert len(result.rows) == 23
    assert set(counts) == {d.id_ for d in documents}
    assert max(counts.values()) - min(counts.values()) <= 1


def test_questions_of_a_document_are_balanced_across_its_sections():
    documents = [sectioned_document("a"), sectioned_document("b")]
    slots = plan_slots(documents, 12, ["factoid"], seed=5)
    per_section = Counter((slot.passages[0].doc_id, slot.passages[0].section) for slot in slots)
    assert len(per_section) == 6  # 2 documents x 3 sections, each used
    assert max(per_section.values()) - min(per_section.values()) <= 1
    for slot in slots:  # the answer lies inside its passage, which lies inside its section
        passage, (start, end) = slot.passages[0], slot.answers[0]
        assert passage.start <= start < end <= passage.end


def test_answers_are_phrases_without_leading_conjunctions():
    import random

    from ragkit.questions.generation.sampling import Passage, pick_answer

    text = "The virus spread fast, and hospitals filled within weeks, which alarmed the regional health authorities."
    passage = Passage("d", "part 1", 0, len(text))
    picked = {text[s:e] for s, e in (pick_answer(text, passage, 12, random.Random(seed)) or (0, 0)
                                     for seed in range(30))}
    assert "hospitals filled within weeks" in picked and "alarmed the regional health authorities" in picked
    assert not any(answer.split()[0] in ("and", "which") for answer in picked)


def test_every_answer_is_the_document_text_at_its_span_and_the_set_reads_back(tmp_path: Path):
    documents = english_documents(count=4)
    result, _ = run(documents, reply_copying(distinct_question), n=16, seed=1)
    texts = {d.id_: d.text for d in documents}
    kinds = Counter(row["type"] for row in result.rows)
    assert kinds == {"factoid": 4, "paraphrase": 4, "multi_hop": 4, "unanswerable": 4}
    for row in result.rows:
        if row["type"] == "unanswerable":
            assert row["answerable"] is False and row["answer"] is None
            continue
        assert texts[row["doc_id"]][row["answer_start"]:row["answer_end"]] == row["answer"]
        for part in row.get("answer_parts", []):
            assert texts[part["doc_id"]][part["answer_start"]:part["answer_end"]] == part["answer"]
    multi = [row for row in result.rows if row["type"] == "multi_hop"]
    assert all(len({part["doc_id"] for part in row["answer_parts"]}) == 2 for row in multi)

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d.id_, "text": d.text}) + "\n" for d in documents), encoding="utf-8")
    out = tmp_path / "generated"
    write_set(out, result.rows, result.record, corpus)
    read = load_question_set(out)
    assert read.format == "squad" and len(read.questions) == 16
    assert validate_against_corpus(read, {d.id_: d for d in load_dataset_corpus(out) or []}) == []
    by_type = Counter(q.question_type for q in read.questions)
    assert by_type["multi_hop"] == 4
    hop = next(q for q in read.questions if q.question_type == "multi_hop")
    assert len(hop.span_groups()) == 2 and len(hop.relevant_docs) == 2
    lost = next(q for q in read.questions if q.question_type == "unanswerable")
    assert not lost.answerable and lost.relevant_docs == {} and lost.source_document == lost.source_doc


def test_an_experiment_reads_the_generated_folder_at_once(tmp_path: Path):
    from ragkit.corpus.store import CorpusStore
    from ragkit.experiments.config import ExperimentConfig
    from ragkit.experiments.runner import load_corpus, load_questions

    documents = english_documents(count=3)
    result, _ = run(documents, reply_copying(distinct_question), n=6, types=["factoid", "multi_hop"])
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d.id_, "text": d.text}) + "\n" for d in documents), encoding="utf-8")
    write_set(tmp_path / "set", result.rows, result.record, corpus)
    config = ExperimentConfig.model_validate({"name": "gen", "dataset": {"path": str(tmp_path / "set")}})
    loaded = load_corpus(config, CorpusStore(tmp_path / "data"))
    questions = load_questions(config, loaded)
    assert [q.id for q in questions.questions] == [row["id"] for row in result.rows]
    assert questions.count_spans() == 3 + 3 * 2


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I cannot do that.", "invalid_reply"),
        ('{"question": "  ", "answer": "x"}', "empty_question"),
        ('{"question": "The answer, copied exactly from the passage", "answer": ""}', "not_a_question"),
        ('{"question": "Welche Probe wurde im Gefrierschrank gelagert und warum?", "answer": ""}', "wrong_language"),
        ('{"question": "Which freezer holds the sample?", "answer": "a moon rock from Mars"}', "answer_not_found"),
    ],
)
def test_a_bad_reply_is_dropped_with_its_reason(reply: str, reason: str):
    result, _ = run(english_documents(count=2), lambda messages, number: reply, n=3, types=["factoid"])
    assert result.rows == []
    assert [item["reason"] for item in result.dropped] == [reason] * 3
    assert result.record["dropped_by_reason"] == {reason: 3}
    assert all(item["detail"] for item in result.dropped)


def test_a_question_containing_its_answer_is_dropped():
    def leaking(number: int, answers: list[str]) -> str:
        return f"Is it true that {answers[0]}?"

    result, _ = run(english_documents(count=2), reply_copying(leaking), n=2, types=["factoid"])
    assert {item["reason"] for item in result.dropped} == {"answer_in_question"}


def test_a_paraphrase_that_copies_its_passage_is_dropped_and_overlap_is_stored():
    def copying(messages, number):
        passage = messages[-1]["content"].split("Passage:\n")[1].split("\n")[0]
        words = passage.split()[:8]
        answer = json.loads(reply_copying(distinct_question)(messages, number))["answer"]
        return json.dumps({"question": " ".join(words) + "?", "answer": answer})

    result, _ = run(english_documents(count=2), copying, n=2, types=["paraphrase"], max_paraphrase_overlap=0.3)
    assert {item["reason"] for item in result.dropped} == {"high_overlap"}
    kept, _ = run(english_documents(count=2), reply_copying(distinct_question), n=2, types=["paraphrase"])
    assert all(row["generation"]["word_overlap"] <= 0.5 for row in kept.rows)
    assert all("word_overlap" in row["generation"] for row in kept.rows)


def test_duplicates_by_normalised_text_and_by_embedding():
    same = reply_copying(lambda number, answers: "What is stored in the FREEZER , then ?" if number % 2 else
                         "what is stored in the freezer then?")
    result, _ = run(english_documents(count=2), same, n=4, types=["factoid"])
    # One text for four different answers is a template: every copy goes, the first one too.
    assert result.rows == []
    assert [item["reason"] for item in result.dropped] == ["duplicate"] * 4
    assert all("a template" in item["detail"] for item in result.dropped)
    # The same text for the same answer is an ordinary duplicate: not a template.
    assert find_templates([(("d", 1, 5), "What is stored, then?"), (("d", 1, 5), "what is STORED then")]) == {}
    assert find_templates([(("d", 1, 5), "What is stored?"), (("d", 9, 12), "What is stored?")]) == {
        "what is stored": 2}
    assert [(d.index, d.of) for d in find_duplicates(["What is stored?", "what is STORED"])] == [(1, 0)]

    near = reply_copying(lambda number, answers: f"Which freezer keeps case {number}?")
    llm = rule_llm(near)

    def embed(texts: list[str]) -> np.ndarray:  # every question about the same: one direction
        return np.array([[1.0, 0.01 * index] for index, _ in enumerate(texts)])

    result = generate_questions(english_documents(count=2), GenerationParams(n=3, types=["factoid"]),
                                LLMClient(llm, None), embed=embed)
    assert len(result.rows) == 1
    assert all("embedding" in item["detail"] for item in result.dropped)
    assert result.record["duplicates_by"] == "normalised text and embedding cosine"


def test_prompts_name_the_passage_language_and_a_reply_in_another_is_dropped():
    german = [make_document(f"de{d}", " ".join(
        f"Die Probe {d}{s} wurde im Gefrierschrank von Gebäude {d} gelagert, und sie ist nicht verloren."
        for s in range(10))) for d in range(2)]
    english = reply_copying(lambda number, answers: "Which freezer was the sample stored in, and why?")
    result, llm = run(german, english, n=2, types=["factoid"])
    assert all("in German" in request[-1]["content"] for request in llm.requests)
    assert {item["reason"] for item in result.dropped} == {"wrong_language"}

    in_german = reply_copying(lambda number, answers: f"In welchem Gebäude wurde die Probe {number} gelagert?")
    result, _ = run(german, in_german, n=2, types=["factoid"])
    assert len(result.rows) == 2 and all(row["generation"]["language"] == "de" for row in result.rows)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Here is a question: What is stored?", "What is stored?"),
        ("Sure! Here's one question in English:\n1. What is stored?", "What is stored?"),
        ("**Question:** What is stored?", "What is stored?"),
        ("Q: \"What is stored?\"", "What is stored?"),
        ("2) What is stored?", "What is stored?"),
        ("What is stored?", "What is stored?"),
    ],
)
def test_preambles_and_numbering_are_stripped(raw: str, clean: str):
    assert clean_question(raw) == clean


def test_stripped_question_is_what_the_set_keeps():
    noisy = reply_copying(lambda number, answers: f"Here is a question: {number}. Which freezer keeps case {number}?")
    result, _ = run(english_documents(count=2), noisy, n=2, types=["factoid"])
    assert [row["question"] for row in result.rows] == ["Which freezer keeps case 1?", "Which freezer keeps case 2?"]


def test_dry_run_counts_equal_the_calls_then_made():
    documents = english_documents(count=5)
    params = GenerationParams(n=17, seed=9)
    counts = dry_run_counts(plan_generation(documents, params), params)
    result, llm = run(documents, reply_copying(distinct_question), n=17, seed=9)
    assert counts["calls"] == len(llm.requests) == result.record["calls"] == 17
    assert counts["by_type"] == dict(Counter(item.slot.type for item in plan_generation(documents, params)))
    assert result.record["prompt_tokens"] == 7 * 17 and result.record["completion_tokens"] == 3 * 17
    assert result.record["model"]["model"] == "scripted" and result.record["seed"] == 9
    assert set(result.record["prompts"]) == {"system", "factoid", "paraphrase", "multi_hop", "unanswerable"}


def test_unknown_type_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"unknown question type.*valid: factoid"):
        GenerationParams(types=["trivia"])
