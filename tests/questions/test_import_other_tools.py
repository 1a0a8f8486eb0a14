"""Sets made by LlamaIndex and ragas from PDFs, imported over ragkit's own ingest of those PDFs.

The PDFs (``tests/questions/other_tools.py``) have two columns, running headers and footers, hyphenated
line ends and ligature glyphs; LlamaIndex reads them with pypdf, ragkit with PDFium, so no context
is a byte-exact piece of ragkit's text.
"""

from __future__ import annotations

import json
import shutil

import pytest

from ragkit.cli import main
from ragkit.questions import load_question_set
from ragkit.questions.interop.report import read_import_report
from ragkit.questions.passages import text_words
from tests.questions import other_tools

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from ragkit.settings import get_settings

    folder = tmp_path_factory.mktemp("other-tools")
    fixture = other_tools.build(folder)
    data_dir = folder / "data"
    one = folder / "one-pdf"
    one.mkdir()
    shutil.copy(sorted(fixture.pdf_folder.iterdir())[0], one)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGKIT_DATA_DIR", str(data_dir))
        get_settings.cache_clear()
        assert main(["ingest", str(fixture.pdf_folder), "--corpus", "pdfs"]) == 0
        assert main(["ingest", str(one), "--corpus", "one-pdf"]) == 0
    get_settings.cache_clear()
    return fixture, data_dir


@pytest.fixture
def data_dir(made, monkeypatch):
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(made[1]))
    get_settings.cache_clear()
    yield made[1]
    get_settings.cache_clear()


def _texts(corpus: str) -> dict[str, str]:
    from ragkit.corpus.store import CorpusStore

    return {document.id_: document.text for document in CorpusStore().load(corpus).documents}


def _import(args: list[str]) -> int:
    return main(["questions", "import", *args])


LAYOUTS = {
    "llamaindex": ("llamaindex", "llamaindex_json"),
    "ragas-jsonl": ("ragas", "ragas_jsonl"),
    "ragas-csv": ("ragas", "ragas_csv"),
    "ragas-hf-folder": ("ragas", "ragas_hf"),
    "ragas-parquet": ("ragas", "ragas_parquet"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_is_located_in_ragkits_ingest_each_context_in_its_article(made, data_dir, layout, tmp_path,
                                                                             capsys):
    fixture, _ = made
    format, attribute = LAYOUTS[layout]
    out = tmp_path / "imported"
    assert _import([str(getattr(fixture, attribute)), "--from", format, "--corpus", "pdfs", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = read_import_report(out)
    assert report is not None and f"{len(fixture.contexts)} questions" in printed
    assert report.questions == len(fixture.contexts) == sum(report.totals.values())
    assert report.located_share is not None and report.located_share >= 0.95
    # each located context in the article it came from
    for (article, _), row in zip(fixture.contexts, report.rows, strict=True):
        assert row.documents in ([], [f"article-{article}.pdf"])
    questions = load_question_set(out)
    located = [q for q in questions.questions if q.passages]
    assert len(located) == report.totals["located"]
    assert all(q.relevant_docs == {q.passages[0].doc_id: 1.0} and q.answers == [other_tools.FREE_ANSWER]
               for q in located)
    assert report.answer_spans == 0 and "0 answer spans" not in printed.splitlines()[-1]


def test_passages_cover_their_contexts_word_for_word_checked_by_hand_on_a_sample(made, data_dir, tmp_path):
    fixture, _ = made
    out = tmp_path / "imported"
    assert _import([str(fixture.llamaindex_json), "--from", "llamaindex", "--corpus", "pdfs", "--out", str(out)]) == 0
    texts = _texts("pdfs")
    questions = load_question_set(out).questions
    for (_, context), question in zip(fixture.contexts, questions, strict=True):
        passage = question.passages[0]
        # ragkit's words of the passage are the context's words (header and footer lines aside)
        ours, theirs = text_words(texts[passage.doc_id][passage.start:passage.end]).tokens, text_words(context).tokens
        assert ours[:3] == theirs[:3] and ours[-3:] == theirs[-3:]
    # By hand: the context LlamaIndex cut around "carboxypeptidase D" (pypdf: "molecu-" at a line
    # end, ligature glyphs) is ragkit's "The molecu-les ... " (PDFium joins the line, "affinity").
    chosen = next(index for index, (_, context) in enumerate(fixture.contexts) if "carboxypeptidase D" in context)
    passage = questions[chosen].passages[0]
    text = texts[passage.doc_id][passage.start:passage.end]
    assert passage.doc_id == "article-1552.pdf"
    assert "low affinity and high\naffinity molecules" in text and "the carboxypeptidase D found for duck" in text
    assert "molecu-\nles" in fixture.contexts[chosen][1] and "molecu-les" in text
    if fixture.ligatures:
        assert "af\ufb01nity" in fixture.contexts[chosen][1]
    # A context across a page break holds the next page's running header in both parsers' text.
    across = [index for index, (_, context) in enumerate(fixture.contexts) if "Journal of Fixture Virology" in context]
    assert across and all(questions[index].passages for index in across)


def test_below_the_share_the_import_fails_naming_reasons_unless_partial_is_allowed(made, data_dir, tmp_path, capsys):
    fixture, _ = made
    out = tmp_path / "partial"
    args = [str(fixture.ragas_jsonl), "--from", "ragas", "--corpus", "one-pdf", "--out", str(out)]
    assert _import(args) == 2
    error = capsys.readouterr().err
    assert "below --min-located 80%" in error and "most common reasons: no document shares a run of words" in error
    assert not (out / "questions.jsonl").exists() and (out / "import_report.json").is_file()
    assert _import([*args, "--allow-partial"]) == 0
    report = read_import_report(out)
    assert report is not None and sum(report.totals.values()) == report.questions == len(fixture.contexts)
    assert 0 < report.totals["located"] < report.questions
    assert len(report.without_ground_truth()) == report.totals["not located"] > 0
    assert sum(report.per_document.values()) == report.contexts_located
    assert _import([str(fixture.ragas_jsonl), "--from", "ragas", "--corpus", "one-pdf", "--out", str(tmp_path / "low"),
                    "--min-located", "0.1"]) == 0
    assert _import([*args, "--min-located", "1.5"]) == 2


def test_an_export_is_what_ragas_and_llamaindex_read_back(made, data_dir, tmp_path):
    from ragas import EvaluationDataset

    fixture, _ = made
    imported = tmp_path / "imported"
    assert _import([str(fixture.ragas_hf), "--from", "ragas", "--corpus", "pdfs", "--out", str(imported)]) == 0
    texts = _texts("pdfs")
    questions = load_question_set(imported).questions
    for format, name in (("ragas", "testset.jsonl"), ("llamaindex", "rag_dataset.json")):
        assert main(["questions", "export", str(imported), "--to", format, "--out", str(tmp_path / name),
                     "--corpus", "pdfs"]) == 0
    dataset = EvaluationDataset.from_jsonl(str(tmp_path / "testset.jsonl"))
    examples = other_tools.load_labelled_rag_dataset(tmp_path / "rag_dataset.json")
    for question, sample, example in zip(questions, dataset.samples, examples, strict=True):
        passages = [texts[p.doc_id][p.start:p.end] for p in question.passages]
        assert sample.user_input == example.query == question.text
        assert sample.reference_contexts == example.reference_contexts == passages
        assert sample.reference == example.reference_answer == other_tools.FREE_ANSWER
    # and read back by ragkit, each passage is found verbatim where it was
    again = tmp_path / "again"
    assert _import([str(tmp_path / "testset.jsonl"), "--from", "ragas", "--corpus", "pdfs", "--out", str(again)]) == 0
    assert [q.passages for q in load_question_set(again).questions] == [q.passages for q in questions]
    report = json.loads((again / "import_report.json").read_text(encoding="utf-8"))
    assert {row["score"] for row in report["rows"] if row["located"]} == {1.0}


def test_an_imported_set_is_scored_at_the_document_span_and_passage_levels(tmp_path):
    """Its located passages make document, span and passage metrics; its free-text reference stays
    the answer. (The sample's own corpus: its corpus.jsonl is copied beside the imported set.)"""
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.results import ResultStore
    from tests.conftest import SAMPLE_DATASET

    rows = [json.loads(line) for line in (SAMPLE_DATASET / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    contexts = [" ".join(row["text"][1500:2600].split()) for row in rows[:4]]
    samples = [{"user_input": " ".join(context.split()[10:25]) + "?", "reference": "An LLM's summary.",
                "reference_contexts": [context]} for context in contexts]
    (tmp_path / "testset.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    out = tmp_path / "imported"
    assert _import([str(tmp_path / "testset.jsonl"), "--from", "ragas", "--corpus", str(SAMPLE_DATASET),
                    "--out", str(out)]) == 0
    questions = load_question_set(out).questions
    assert [q.passages[0].doc_id for q in questions] == [row["_id"] for row in rows[:4]]
    assert all(q.answers == ["An LLM's summary."] and not q.spans for q in questions)
    config = config_from_dict({"name": "imported", "dataset": {"path": str(out)}, "chunkers": ["document"],
                               "retrievers": ["bm25"], "top_k": [3]})
    assert not run_experiment(config, tmp_path / "results").errors
    scores = ResultStore(tmp_path / "results").read("scores")
    names = set(scores["metric"])
    assert {"recall@3", "span_recall@3", "passage_recall@3", "passage_precision@3", "passage_iou@3"} <= names
    # a whole-document chunk holds the whole passage: passage recall 1 wherever the document is first
    first = scores[scores["metric"] == "span_recall@1"].set_index("question_id")["value"]
    recall = scores[scores["metric"] == "passage_recall@1"].set_index("question_id")["value"]
    assert (recall[first == 1.0] == 1.0).all() and (first == 1.0).any()
