"""Round trips through ragas, LlamaIndex, BEIR and TREC qrels keep every question, and every span
where the format can hold one (ragas and LlamaIndex through their contexts)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.questions import load_dataset_corpus, load_question_set
from ragkit.questions.generation import GenerationParams, generate_questions, write_set
from ragkit.questions.interop import export_question_set, import_question_set, ragas_rows, read_trec_qrels
from tests.conftest import SAMPLE_DATASET
from tests.questions.generation_helpers import distinct_question, english_documents, reply_copying, rule_llm

pytestmark = pytest.mark.unit


def cuts_a_word(text: str, start: int, end: int) -> bool:
    """Whether [start, end) begins or ends between two word characters."""
    return bool((start > 0 and re.match(r"\w\w", text[start - 1:start + 1]))
                or (end < len(text) and re.match(r"\w\w", text[end - 1:end + 1])))


def spans_of(question_set):
    return [(q.text, q.answerable, sorted((s.doc_id, s.start, s.end, s.group) for s in q.spans))
            for q in question_set.questions]


@pytest.fixture(scope="module")
def sample():
    return load_question_set(SAMPLE_DATASET), {d.id_: d for d in load_dataset_corpus(SAMPLE_DATASET) or []}


@pytest.fixture
def generated(tmp_path: Path):
    documents = english_documents(count=4)
    result = generate_questions(documents, GenerationParams(n=12, seed=2), LLMClient(
        rule_llm(reply_copying(distinct_question)), None))
    write_set(tmp_path / "gen", result.rows, result.record)
    return load_question_set(tmp_path / "gen"), {d.id_: d for d in documents}


@pytest.mark.parametrize("format", ["ragas", "llamaindex"])
def test_context_formats_keep_every_question_and_span_of_the_sample(sample, format: str, tmp_path: Path):
    questions, documents = sample
    out = tmp_path / ("set.jsonl" if format == "ragas" else "rag_dataset.json")
    export_question_set(questions, format, out, documents)
    back = import_question_set(out, format, documents).questions
    assert len(back.questions) == len(questions.questions) == 247
    # An answer is located as whole words only: the sample's annotations cut inside a word ("sed"
    # of "increased", "he case was diagnosed on 1 February") come back without their span.
    texts = {doc_id: document.text for doc_id, document in documents.items()}
    cut = {q.id for q in questions.questions for s in q.spans if cuts_a_word(texts[s.doc_id], s.start, s.end)}
    assert len(cut) == 23
    assert spans_of(back) == [(text, answerable, [] if q.id in cut else spans)
                              for q, (text, answerable, spans) in zip(questions.questions, spans_of(questions))]
    if format == "ragas":  # ragas keeps the ids (an extra field it ignores)
        assert [q.id for q in back.questions] == [q.id for q in questions.questions]


@pytest.mark.parametrize("format", ["ragas", "llamaindex"])
def test_context_formats_keep_multi_hop_parts_and_unanswerable(generated, format: str, tmp_path: Path):
    questions, documents = generated
    out = tmp_path / ("set.json" if format == "ragas" else "rag_dataset.json")
    export_question_set(questions, format, out, documents)
    back = import_question_set(out, format, documents).questions
    assert spans_of(back) == spans_of(questions)
    hops = [q for q in back.questions if len(q.span_groups()) == 2]
    assert hops and all(q.answer_parts for q in hops)
    assert sum(not q.answerable for q in back.questions) == sum(not q.answerable for q in questions.questions) > 0


def test_ragas_rows_are_what_ragas_reads(sample):
    from ragas import EvaluationDataset

    questions, documents = sample
    rows = ragas_rows(questions, {k: d.text for k, d in documents.items()})
    dataset = EvaluationDataset.from_list(rows)
    first = dataset.samples[0]
    assert first.user_input == questions.questions[0].text
    assert first.reference == questions.questions[0].answers[0]
    assert first.reference in first.reference_contexts[0]


def test_an_answer_occurring_earlier_in_its_sentence_still_round_trips(tmp_path: Path):
    from ragkit.corpus.model import make_document
    from ragkit.questions import QuestionSet

    text = "The dose was 5 mg in week one and 5 mg again in week two. Nothing else."
    documents = {"d": make_document("d", text)}
    second = text.index("5 mg", 20)
    question = {"id": "q", "text": "What was the second dose?", "relevant_docs": {"d": 1.0},
                "spans": [{"doc_id": "d", "start": second, "end": second + 4}], "answers": ["5 mg"]}
    questions = QuestionSet.model_validate({"name": "x", "format": "squad", "questions": [question]})
    export_question_set(questions, "ragas", tmp_path / "r.jsonl", documents)
    assert spans_of(import_question_set(tmp_path / "r.jsonl", "ragas", documents).questions) == spans_of(questions)


def test_beir_keeps_questions_and_judgements_not_spans(sample, tmp_path: Path):
    questions, documents = sample
    summary = export_question_set(questions, "beir", tmp_path / "beir", documents)
    assert "247 questions" in summary
    back = load_question_set(tmp_path / "beir", format="beir")
    assert [(q.id, q.text, q.relevant_docs) for q in back.questions] == \
        [(q.id, q.text, q.relevant_docs) for q in questions.questions]
    assert back.count_spans() == 0
    assert {d.id_: d.text for d in load_dataset_corpus(tmp_path / "beir") or []} == \
        {k: d.text for k, d in documents.items()}


def test_beir_and_trec_leave_out_unanswerable_questions_and_say_so(generated, tmp_path: Path):
    questions, _ = generated
    lost = sum(not q.relevant_docs for q in questions.questions)
    assert f"{lost} without a relevant document left out" in export_question_set(questions, "beir", tmp_path / "b")
    assert f"{lost} without a relevant document left out" in export_question_set(questions, "trec", tmp_path / "q")


def test_trec_qrels_round_trip_with_grades(tmp_path: Path):
    from ragkit.questions import QuestionSet

    questions = QuestionSet.model_validate({"name": "x", "format": "jsonl", "questions": [
        {"id": "q1", "text": "a?", "relevant_docs": {"d1": 2.0, "d2": 1.0}},
        {"id": "q2", "text": "b?", "relevant_docs": {"d3": 0.5}},
    ]})
    export_question_set(questions, "trec", tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text(encoding="utf-8").splitlines()[0] == "q1 0 d1 2"
    assert read_trec_qrels(tmp_path / "qrels.txt") == {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 0.5}}


def test_bad_files_are_one_line_errors(tmp_path: Path):
    (tmp_path / "x.json").write_text(json.dumps({"nope": []}), encoding="utf-8")
    with pytest.raises(ConfigError, match="'examples' list"):
        import_question_set(tmp_path / "x.json", "llamaindex", {})
    with pytest.raises(ConfigError, match="Valid choices: ragas, llamaindex"):
        import_question_set(tmp_path / "x.json", "squad", {})
    (tmp_path / "q.txt").write_text("q1 0 d1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 1"):
        read_trec_qrels(tmp_path / "q.txt")


def test_ragas_0_1_column_names_and_a_pandas_csv_are_read(sample, tmp_path: Path):
    """ragas 0.1 testsets name the columns question / contexts / ground_truth(s); a CSV written by
    pandas holds each list as its Python repr."""
    import pandas as pd

    questions, documents = sample
    texts = {doc_id: document.text for doc_id, document in documents.items()}
    rows = ragas_rows(questions, texts)[:3]
    old = [{"question": row["user_input"], "contexts": row["reference_contexts"], "ground_truth": row["reference"],
            "evolution_type": "simple"} for row in rows]
    (tmp_path / "v01.jsonl").write_text("".join(json.dumps(row) + "\n" for row in old), encoding="utf-8")
    pd.DataFrame([{**row, "ground_truths": [row.pop("ground_truth")]} for row in old]).to_csv(tmp_path / "v01.csv")
    for name in ("v01.jsonl", "v01.csv"):
        imported = import_question_set(tmp_path / name, "ragas", documents)
        assert [q.text for q in imported.questions.questions] == [row["user_input"] for row in rows]
        assert spans_of(imported.questions) == spans_of(questions)[:3]
        assert imported.report.totals["located"] == 3 and imported.report.located_share == 1.0


def test_a_question_with_no_located_context_and_no_reference_is_left_out_and_counted(sample, tmp_path: Path):
    _, documents = sample
    text = next(iter(documents.values())).text
    rows = [{"id": "a", "user_input": "Found?", "reference": "", "reference_contexts": [text[200:700]]},
            {"id": "b", "user_input": "Lost?", "reference": "",
             "reference_contexts": ["Bananas grow on large herbaceous flowering plants in the tropics."]},
            {"id": "c", "user_input": "Abstain?", "reference": "", "reference_contexts": []}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    imported = import_question_set(tmp_path / "r.jsonl", "ragas", documents)
    assert [(q.id, q.answerable, bool(q.passages)) for q in imported.questions.questions] == [
        ("a", True, True), ("c", False, False)]
    report = imported.report
    assert report.left_out == ["b"] and report.without_ground_truth() == ["b"]
    assert report.totals == {"located": 1, "partly located": 0, "not located": 1, "unanswerable": 1}
    assert report.located_share == 0.5 and sum(report.totals.values()) == report.questions == 3
