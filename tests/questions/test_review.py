"""Review before freezing: accept, edit (span re-verified), reject; a frozen set is content-hashed
and read by experiments like any imported set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.questions import load_dataset_corpus, load_question_set, validate_against_corpus
from ragkit.questions.generation import GenerationParams, generate_questions, read_rows, write_set
from ragkit.questions.review import decide, edit, freeze, load_review, pending, save_review
from tests.questions.generation_helpers import distinct_question, english_documents, reply_copying, rule_llm

pytestmark = pytest.mark.unit


@pytest.fixture
def generated(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    documents = english_documents(count=3)
    result = generate_questions(documents, GenerationParams(n=6, types=["factoid", "multi_hop", "unanswerable"]),
                                LLMClient(rule_llm(reply_copying(distinct_question)), None))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d.id_, "text": d.text}) + "\n" for d in documents), encoding="utf-8")
    out = tmp_path / "gen"
    write_set(out, result.rows, result.record, corpus)
    return out, {d.id_: d.text for d in documents}


def test_accept_edit_reject_then_freeze(generated, tmp_path: Path):
    folder, texts = generated
    rows = read_rows(folder)
    factoid = next(row for row in rows if row["type"] == "factoid")
    review = decide(load_review(folder), rows[0]["id"], "accepted")
    new_answer = texts[factoid["doc_id"]][factoid["answer_start"]:factoid["answer_end"]].split()[0:2]
    review = edit(review, factoid, texts, question="Where exactly was it stored?", answer=" ".join(new_answer))
    review = decide(review, rows[-1]["id"], "rejected")
    save_review(folder, review)
    assert len(pending(rows, load_review(folder))) == len(rows) - 3

    with pytest.raises(ConfigError, match="not reviewed yet"):
        freeze(folder, tmp_path / "frozen")
    frozen = freeze(folder, tmp_path / "frozen", allow_pending=True)
    assert frozen.questions == 2 and frozen.rejected == 1
    assert Path(frozen.path).name.endswith(frozen.content_key)
    read = load_question_set(frozen.path)
    edited = read.by_id()[factoid["id"]]
    assert edited.text == "Where exactly was it stored?"
    assert edited.answers == [" ".join(new_answer)]
    assert validate_against_corpus(read, {d.id_: d for d in load_dataset_corpus(frozen.path) or []}) == []
    # Same review, same folder; a different review, another key.
    assert freeze(folder, tmp_path / "frozen", allow_pending=True).content_key == frozen.content_key
    save_review(folder, decide(review, rows[1]["id"], "accepted"))
    assert freeze(folder, tmp_path / "frozen", allow_pending=True).content_key != frozen.content_key


def test_an_edited_answer_must_be_a_span_of_its_document(generated):
    folder, texts = generated
    row = next(row for row in read_rows(folder) if row["type"] == "factoid")
    with pytest.raises(ConfigError, match="is not in document"):
        edit(load_review(folder), row, texts, answer="a sentence the document never says")
    with pytest.raises(ConfigError, match="does not read"):
        edit(load_review(folder), row, texts, answer=row["answer"], answer_start=row["answer_start"] + 1)
    review = edit(load_review(folder), row, texts, answer=row["answer"], answer_start=row["answer_start"])
    assert review.decisions[row["id"]].parts[0]["answer_start"] == row["answer_start"]


def test_the_nearest_occurrence_of_an_edited_answer_is_taken(generated):
    folder, texts = generated
    row = next(row for row in read_rows(folder) if row["type"] == "factoid")
    review = edit(load_review(folder), row, texts, answer="The sample number")  # in every sentence
    start = review.decisions[row["id"]].parts[0]["answer_start"]
    text = texts[row["doc_id"]]
    occurrences = [i for i in range(len(text)) if text.startswith("The sample number", i)]
    assert start == min(occurrences, key=lambda offset: abs(offset - row["answer_start"]))


def test_a_multi_hop_part_is_edited_in_its_own_document(generated):
    folder, texts = generated
    row = next(row for row in read_rows(folder) if row["type"] == "multi_hop")
    second = row["answer_parts"][1]
    words = second["answer"].split()[:2]
    review = edit(load_review(folder), row, texts, answer=" ".join(words), part=1)
    part = review.decisions[row["id"]].parts[1]
    assert part["doc_id"] == second["doc_id"]
    assert texts[part["doc_id"]][part["answer_start"]:part["answer_end"]] == " ".join(words)
    with pytest.raises(ConfigError, match="part 2 does not exist"):
        edit(review, row, texts, answer="x", part=2)


def test_an_unanswerable_question_given_an_answer_in_review_becomes_answerable(generated, tmp_path: Path):
    from ragkit.cli import main

    folder, texts = generated
    row = next(row for row in read_rows(folder) if row["type"] == "unanswerable")
    drawn = row["generation"]["passages"][0]
    wanted = texts[row["doc_id"]][drawn["start"]:drawn["end"]].split(",")[0]  # a phrase of its own passage
    assert main(["questions", "review", str(folder), "--edit", row["id"], "--answer", wanted]) == 0
    part = load_review(folder).decisions[row["id"]].parts[0]
    assert texts[row["doc_id"]][part["answer_start"]:part["answer_end"]] == wanted
    assert drawn["start"] <= part["answer_start"] < drawn["end"]  # the occurrence in the passage it came from

    frozen = freeze(folder, tmp_path / "frozen", allow_pending=True)
    question = load_question_set(frozen.path).by_id()[row["id"]]
    assert question.answerable and question.answers == [wanted]
    assert [(s.doc_id, s.start, s.end) for s in question.spans] == [(row["doc_id"], part["answer_start"],
                                                                     part["answer_end"])]
