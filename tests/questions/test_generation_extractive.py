"""The extractive generator on hand-built documents: a table in each shape the parsers write,
headings, a definition, figures and dates. Every answer is the document's text at its span, each
question names its type and method, and the same seed gives the same set."""

from __future__ import annotations

from collections import Counter

import pytest

from ragkit.corpus.model import make_document
from ragkit.questions.generation import GenerationParams
from ragkit.questions.generation.extractive import document_candidates, generate_extractive, plan_extractive

pytestmark = pytest.mark.unit

PDF_STATEMENT = ("Consolidated statement of operations\n"
                 "2026 2025\n"
                 "Net revenue 12,345 11,002\n"
                 "Operating income 2,100 (1,950)\n")
CSV_ROWS = "Region: North; Cases: 120; Deaths: 4\nRegion: South; Cases: 80; Deaths: 2"
PIPE_TABLE = "| Vaccine | Doses | Efficacy |\n|---|---|---|\n| Alpha shot | 2 | 94% |\n| Beta shot | 1 | 66% |"
PROSE = ("Coronavirus outbreak in Wuhan\n\n"
         "A coronavirus is a virus with a crown of spike proteins on its surface. The outbreak began in "
         "December 2019 in the city of Wuhan and spread within weeks. A total of 424 clinical samples were examined "
         "by the regional laboratory during the first wave. The survey was led by Ann Cullinane at the national "
         "equine centre in the spring.\n")


def documents():
    body = ("The committee met four times and reviewed the budget, the staffing plan and the safety record "
            "of every site; its members agreed on the priorities for the next fiscal year and asked for a report.")
    sectioned_text = f"Budget review\n{body}\n"
    return [
        make_document("filing.pdf", PDF_STATEMENT + "\n" + PROSE),
        make_document("cases.csv", CSV_ROWS),
        make_document("vaccines.md", PIPE_TABLE + "\n\nA vaccine is a preparation that trains the immune system "
                                                  "to recognise a pathogen. Trials enrolled 30,000 people in 2020.\n"),
        make_document("minutes.docx", sectioned_text, {"sections": [[0, "Minutes > Budget review"]]}),
    ]


def by_question(candidates):
    return {c.question: c for kinds in candidates.values() for c in kinds} if isinstance(candidates, dict) else \
        {c.question: c for c in candidates}


def test_table_rows_in_each_parser_shape_give_cell_answers():
    docs = {d.id_: d for d in documents()}
    pdf = by_question(document_candidates(docs["filing.pdf"])["table"])
    assert {q: docs["filing.pdf"].text[c.answer[0]:c.answer[1]] for q, c in pdf.items()} == {
        "What was Net revenue for 2026?": "12,345", "What was Net revenue for 2025?": "11,002",
        "What was Operating income for 2026?": "2,100", "What was Operating income for 2025?": "(1,950)"}
    csv = by_question(document_candidates(docs["cases.csv"])["table"])
    assert {q: docs["cases.csv"].text[c.answer[0]:c.answer[1]] for q, c in csv.items()} == {
        "What was North for Cases?": "120", "What was North for Deaths?": "4",
        "What was South for Cases?": "80", "What was South for Deaths?": "2"}
    pipe = by_question(document_candidates(docs["vaccines.md"])["table"])
    assert {q: docs["vaccines.md"].text[c.answer[0]:c.answer[1]] for q, c in pipe.items()} == {
        "What was Alpha shot for Doses?": "2", "What was Alpha shot for Efficacy?": "94%",
        "What was Beta shot for Doses?": "1", "What was Beta shot for Efficacy?": "66%"}


def test_headings_definitions_and_clozes():
    docs = {d.id_: d for d in documents()}
    found = document_candidates(docs["filing.pdf"])
    text = docs["filing.pdf"].text
    heading = by_question(found["heading"])["Coronavirus outbreak in Wuhan"]
    assert text[heading.answer[0]:heading.answer[1]].startswith("A coronavirus is a virus")
    definition = by_question(found["definition"])["What is a coronavirus?"]
    assert text[definition.answer[0]:definition.answer[1]] == "a virus with a crown of spike proteins on its surface"
    clozes = {text[c.answer[0]:c.answer[1]]: c.question for c in found["cloze"]}
    assert clozes["December 2019"].endswith(": when?") and "___" in clozes["December 2019"]
    assert clozes["424"] == ("A total of ___ clinical samples were examined by the regional laboratory during the "
                             "first wave: how much?")
    assert clozes["Ann Cullinane"].endswith(": who?")
    minutes = document_candidates(docs["minutes.docx"])["heading"]  # from the sections metadata
    assert [c.question for c in minutes] == ["Budget review"]


def test_generated_set_has_exact_spans_labelled_methods_and_is_deterministic():
    docs = documents()
    texts = {d.id_: d.text for d in docs}
    params = GenerationParams(method="extractive", n=16, seed=3)
    first = generate_extractive(docs, params)
    again = generate_extractive(docs, params)
    assert [r["question"] for r in first.rows] == [r["question"] for r in again.rows]
    other = generate_extractive(docs, params.model_copy(update={"seed": 4}))
    assert [r["question"] for r in other.rows] != [r["question"] for r in first.rows]
    for row in first.rows:
        assert texts[row["doc_id"]][row["answer_start"]:row["answer_end"]] == row["answer"]
        assert row["method"] == "extractive" and row["type"] in ("table", "heading", "definition", "cloze")
    assert set(Counter(r["type"] for r in first.rows)) == {"table", "heading", "definition", "cloze"}
    assert first.record["method"] == "extractive" and first.record["kept"] == len(first.rows)
    assert first.record["outcome"]["summary"].startswith(f"kept {len(first.rows)} of 16")


def test_questions_are_balanced_over_documents_while_they_have_candidates():
    docs = documents()  # minutes.docx offers one question (its heading), the others many
    planned = plan_extractive(docs, 7, ["table", "heading", "definition", "cloze"], seed=0)
    assert Counter(c.doc_id for c in planned) == {"minutes.docx": 1, "filing.pdf": 2, "cases.csv": 2,
                                                  "vaccines.md": 2}


def test_a_question_standing_for_several_answers_is_dropped_every_copy():
    same = "Region: North; Cases: 120\nRegion: North; Cases: 95"  # "What was North for Cases?" twice
    result = generate_extractive([make_document("twice.csv", same)],
                                 GenerationParams(method="extractive", n=2, types=["table"]))
    assert result.rows == []
    assert [item["reason"] for item in result.dropped] == ["duplicate", "duplicate"]
    assert "template" in result.dropped[0]["detail"]


def test_extractive_types_are_validated_per_method():
    with pytest.raises(ValueError, match="valid: table, heading, definition, cloze"):
        GenerationParams(method="extractive", types=["factoid"])
    assert GenerationParams(method="extractive").types == ["table", "heading", "definition", "cloze"]
    assert GenerationParams().types == ["factoid", "paraphrase", "multi_hop", "unanswerable"]
