"""Every `ragkit` command over a table of bad inputs: a clear error naming the bad thing, no traceback.

Each case runs in-process through `ragkit.cli.main` (argparse's own usage errors leave through
SystemExit, as they do for a user); three run through a real `python -m ragkit.cli` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ragkit.cli import main
from tests.conftest import REPO_ROOT
from tests.factories import write_beir

pytestmark = pytest.mark.integration

GOOD = """\
name: tiny
dataset: {{path: {beir}, format: beir}}
chunkers: [document]
embedders: []
retrievers: [bm25]
top_k: [1, 3]
"""
# file name -> its text, made from the valid config above.
BAD_FILES: dict[str, Callable[[str], str]] = {
    "syntax.yaml": lambda good: "name: x\ndataset: {path: a\n  bad: [\n",
    "tab.yaml": lambda good: "name: x\n\tdataset: y\n",
    "twice.yaml": lambda good: good + "name: again\n",
    "tag.yaml": lambda good: "name: !!python/object:os.system x\n",
    "list.yaml": lambda good: "- name: x\n- dataset: y\n",
    "empty.yaml": lambda good: "",
    "unknown_key.yaml": lambda good: good + "chunker: [token]\n",
    "nested_key.yaml": lambda good: good.replace("format: beir", "fromat: beir"),
    "chunker.yaml": lambda good: good.replace("[document]", "[documnt]"),
    "retriever.yaml": lambda good: good.replace("[bm25]", "[bm26]"),
    "embedder.yaml": lambda good: good.replace("embedders: []", "embedders: [minilmx]"),
    "judge.yaml": lambda good: good + "judges: {retreival: llm}\n",
    "judge_mode.yaml": lambda good: good + "judges: {retrieval: super}\n",
    "llm.yaml": lambda good: good + "llm: {default: gpt}\n",
    "llm_role.yaml": lambda good: good + "llm: {roles: {writer: local}}\n",
    "param.yaml": lambda good: good.replace("[document]", "[{type: token, params: {size: 3}}]"),
    "chunk_size.yaml": lambda good: good.replace("[document]", "[{type: token, params: {chunk_size: -1}}]"),
    "overlap.yaml": lambda good: good.replace(
        "[document]", "[{type: token, params: {chunk_size: 100, chunk_overlap: 500}}]"),
    "top_k.yaml": lambda good: good.replace("[1, 3]", "0"),
    "top_k_type.yaml": lambda good: good.replace("[1, 3]", "many"),
    "chunkers_type.yaml": lambda good: good.replace("[document]", "5"),
    "dataset_type.yaml": lambda good: "name: x\ndataset: questions.jsonl\n",
    "limit.yaml": lambda good: good.replace("format: beir", "format: beir, limit: 0"),
    "corpus_both.yaml": lambda good: good + "corpus: {name: a, path: b}\n",
    "metric.yaml": lambda good: good + "generator: true\nevaluation: {metrics: [faithfullness]}\n",
    "corpus_name.yaml": lambda good: good + "corpus: {name: nosuch}\n",
    "dataset_path.yaml": lambda good: good.replace("/beir,", "/beir-missing,"),
    "dataset_format.yaml": lambda good: good.replace("format: beir", "format: xml"),
}
USAGE = "usage"  # an argparse error: usage line plus message, exit 2

# (case id, argv, exit code, fragments stderr must contain). {d} is the workspace folder,
# {results} a real results folder with two runs.
CASES = [
    ("run: missing file", ["run", "{d}/nope.yaml"], 2, ["nope.yaml", "does not exist"]),
    ("run: a folder", ["run", "{d}"], 2, ["is a folder"]),
    ("run: YAML syntax", ["run", "{d}/syntax.yaml"], 2, ["syntax.yaml, line 3, column 6", "invalid YAML"]),
    ("run: YAML tab", ["run", "{d}/tab.yaml"], 2, ["tab.yaml, line 2, column 1", "'\\t'"]),
    ("run: key twice", ["run", "{d}/twice.yaml"], 2, ["key 'name' is written twice (first on line 1)"]),
    ("run: not UTF-8", ["run", "{d}/latin1.yaml"], 2, ["latin1.yaml", "not UTF-8"]),
    ("run: python tag", ["run", "{d}/tag.yaml"], 2, ["tag.yaml, line 1", "python/object"]),
    ("run: list at top", ["run", "{d}/list.yaml"], 2, ["expected a mapping", "got a YAML list"]),
    ("run: empty file", ["run", "{d}/empty.yaml"], 2, ["'name': Field required", "'dataset': Field required"]),
    ("run: unknown key", ["run", "{d}/unknown_key.yaml"], 2,
     ["unknown field 'chunker'", "valid fields at the top level: name, description, dataset, corpus, chunkers"]),
    ("run: unknown nested key", ["run", "{d}/nested_key.yaml"], 2,
     ["unknown field 'dataset.fromat'", "valid fields of 'dataset': path, format, split, limit"]),
    ("run: unknown chunker", ["run", "{d}/chunker.yaml"], 2,
     ["chunkers.0: unknown chunker 'documnt'",
      "Valid choices: by_file_type, code, document, llm_semantic, markdown, recursive"]),
    ("run: unknown retriever", ["run", "{d}/retriever.yaml"], 2,
     ["retrievers.0: unknown retriever 'bm26'", "Valid choices: bm25, dense, hybrid, mmr"]),
    ("run: unknown embedder", ["run", "{d}/embedder.yaml"], 2,
     ["embedders.0: unknown embedder 'minilmx'", "Valid choices: huggingface, minilm, minilm-onnx, ollama"]),
    ("run: unknown judge", ["run", "{d}/judge.yaml"], 2, ["unknown judge ['retreival']", "rerank, retrieval"]),
    ("run: unknown judge mode", ["run", "{d}/judge_mode.yaml"], 2,
     ["judges.retrieval: no mode 'super'", "Valid modes: off, llm, both"]),
    ("run: unknown LLM backend", ["run", "{d}/llm.yaml"], 2,
     ["llm.default: unknown llm 'gpt'", "Valid choices: local, ollama, openai"]),
    ("run: unknown LLM role", ["run", "{d}/llm_role.yaml"], 2, ["unknown role ['writer']", "generator, evaluation"]),
    ("run: unknown parameter", ["run", "{d}/param.yaml"], 2,
     ["chunkers.0: chunker 'token': unknown parameter 'size'", "Valid parameters: chunk_overlap, chunk_size"]),
    ("run: chunk_size -1", ["run", "{d}/chunk_size.yaml"], 2, ["'chunk_size'", "greater than or equal to", "(got -1)"]),
    ("run: overlap > size", ["run", "{d}/overlap.yaml"], 2,
     ["chunk_overlap (500) must be smaller than chunk_size (100)"]),
    ("run: top_k 0", ["run", "{d}/top_k.yaml"], 2, ["top_k values must be between 1 and 1000, got [0]"]),
    ("run: top_k wrong type", ["run", "{d}/top_k_type.yaml"], 2, ["'top_k'", "valid list", "'many'"]),
    ("run: chunkers wrong type", ["run", "{d}/chunkers_type.yaml"], 2, ["'chunkers'", "valid list", "(got 5)"]),
    ("run: dataset wrong type", ["run", "{d}/dataset_type.yaml"], 2, ["'dataset'", "'questions.jsonl'"]),
    ("run: limit 0", ["run", "{d}/limit.yaml"], 2, ["'dataset.limit'", "(got 0)"]),
    ("run: corpus name and path", ["run", "{d}/corpus_both.yaml"], 2, ["'corpus'", "exactly one of 'name'"]),
    ("run: unknown metric", ["run", "{d}/metric.yaml"], 2,
     ["unknown metric 'faithfullness'", "Valid metrics: faithfulness, answer_relevancy"]),
    ("run: unknown corpus", ["run", "{d}/corpus_name.yaml"], 2, ["unknown corpus 'nosuch'", "Existing corpora"]),
    ("run: dataset missing", ["run", "{d}/dataset_path.yaml"], 2, ["beir-missing"]),
    ("run: dataset format", ["run", "{d}/dataset_format.yaml"], 2,
     ["unknown question-set format 'xml'", "auto, beir, squad, jsonl, csv"]),
    ("run: --out is a file", ["run", "{d}/good.yaml", "--out", "{d}/good.yaml"], 2, ["--out", "good.yaml is a file"]),
    ("run: --status-file a folder", ["run", "{d}/good.yaml", "--status-file", "{d}"], 2,
     ["--status-file", "is a folder"]),
    ("set: no '='", ["run", "{d}/good.yaml", "--set", "top_k"], 2, ["--set expects dotted.key=value, got 'top_k'"]),
    ("set: unknown dotted key", ["run", "{d}/good.yaml", "--set", "dataset.lmit=5"], 2,
     ["unknown field 'dataset.lmit'", "path, format, split, limit"]),
    ("set: unknown top key", ["run", "{d}/good.yaml", "--set", "topk=5"], 2, ["unknown field 'topk'", "top_k"]),
    ("set: bad YAML value", ["run", "{d}/good.yaml", "--set", "top_k=[1,"], 2,
     ["--set top_k: value '[1,', line 1, column 4: invalid YAML"]),
    ("set: empty key", ["run", "{d}/good.yaml", "--set", "=5"], 2, ["'' is not a dotted.key"]),
    ("set: key under a value", ["run", "{d}/good.yaml", "--set", "name.first=x"], 2,
     ["--set name.first: 'name' is a str, not a section"]),
    ("set: bad value type", ["run", "{d}/good.yaml", "--set", "shard_size=lots"], 2, ["'shard_size'", "'lots'"]),
    ("set: unknown chunker", ["run", "{d}/good.yaml", "--set", "chunkers=[nope]"], 2,
     ["unknown chunker 'nope'", "recursive, semantic, sentence, token"]),
    ("summary: missing folder", ["summary", "{d}/nowhere"], 2, ["no results folder at", "nowhere"]),
    ("summary: not a results folder", ["summary", "{d}/emptydir"], 2, ["no results folder at", "emptydir"]),
    ("compact: missing folder", ["compact", "{d}/nowhere"], 2, ["no results folder at", "nowhere"]),
    ("compact: not a results folder", ["compact", "{d}/emptydir"], 2, ["no results folder at", "emptydir"]),
    ("check: missing folder", ["check", "{d}/nowhere"], 2, ["no results folder at", "nowhere"]),
    ("check: not a results folder", ["check", "{d}/emptydir", "--repair"], 2, ["no results folder at", "emptydir"]),
    ("cache: bad duration", ["cache", "prune", "--older-than", "3x"], 2, ["'3x' is not a duration", "30d"]),
    ("run: --out a folder of other files", ["run", "{d}/good.yaml", "--out", "{d}"], 2,
     ["is not empty and is not a ragkit results folder: it holds", "--force"]),
    ("export: unknown format", ["export", "{results}", "--format", "pdf"], USAGE,
     ["invalid choice: 'pdf'", "'csv', 'parquet', 'xlsx', 'json', 'html'"]),
    ("export: missing folder", ["export", "{d}/nowhere", "--format", "csv"], 2, ["no results folder at"]),
    ("export: unknown run id", ["export", "{results}", "--format", "csv", "--runs", "nosuchrun", "--out", "{d}/x.zip"],
     2, ["--runs 'nosuchrun' matches no run", "Valid runs"]),
    ("export: --out a folder", ["export", "{results}", "--format", "csv", "--out", "{d}"], 2, ["--out", "is a folder"]),
    ("report: unknown format", ["report", "{results}", "--format", "pdf"], USAGE, ["'md', 'html', 'json'"]),
    ("report: unknown metric", ["report", "{results}", "--metrics", "recal@5"], 2,
     ["recal@5", "Valid metrics: recall@1"]),
    ("report: not a results folder", ["report", "{d}/emptydir"], 2, ["no results folder at"]),
    ("report: bad depth rule", ["report", "{results}", "--depth-rule", "deep"], USAGE, ["'common', 'asked'"]),
    ("export-pipeline: missing folder", ["export-pipeline", "{d}/nowhere", "r1"], 2, ["no results folder at"]),
    ("export-pipeline: unknown run id", ["export-pipeline", "{results}", "nosuchrun", "--out", "{d}/app.py"], 2,
     ["no run 'nosuchrun'", "Runs: "]),
    ("export-pipeline: --out a folder", ["export-pipeline", "{results}", "r1", "--out", "{d}"], 2,
     ["--out", "is a folder"]),
    ("report: malformed baseline", ["report", "{results}", "--baseline", "retriever"], 2,
     ["--baseline 'retriever'", "factor=level"]),
    ("report: unknown baseline level", ["report", "{results}", "--baseline", "top_k=7"], 2,
     ["unknown level '7' of top_k", "Valid levels:"]),
    ("report: --out a folder", ["report", "{results}", "--out", "{d}"], 2, ["--out", "is a folder"]),
    ("report: --out under a file", ["report", "{results}", "--out", "{d}/good.yaml/report.md"], 2, ["good.yaml"]),
    ("best: unknown metric", ["best", "{results}", "--metric", "ndcg@11"], 2,
     ["metric 'ndcg@11' is not scored", "Valid metrics:"]),
    ("best: negative latency", ["best", "{results}", "--metric", "mrr", "--max-latency-ms", "-1"], USAGE,
     ["expected a number >= 0"]),
    ("best: missing folder", ["best", "{d}/nowhere", "--metric", "mrr"], 2, ["no results folder at"]),
    ("questions plan: unknown metric", ["questions", "plan", "{results}", "--detect", "0.03", "--metric", "ndcg@11"],
     2, ["metric 'ndcg@11' is not scored", "Valid metrics:"]),
    ("questions plan: bad difference", ["questions", "plan", "{results}", "--detect", "0"], USAGE,
     ["expected a difference > 0"]),
    ("questions plan: missing folder", ["questions", "plan", "{d}/nowhere", "--detect", "0.03"], 2,
     ["no results folder at"]),
    ("export-pipeline: unknown generator", ["export-pipeline", "{results}", "r1", "--out", "{d}/app.py",
                                            "--generator", "gpt9"], 2,
     ["unknown LLM backend 'gpt9'", "Valid backends:"]),
    ("failures: unknown run", ["failures", "{results}", "--run", "nosuch"], 2, ["unknown run id(s): nosuch"]),
    ("failures: bad cut", ["failures", "{results}", "--cut", "0"], USAGE, ["--cut must be a whole number"]),
    ("compare: bad condition", ["compare", "{results}", "{results}", "--fail-if", "mrr <= 1"], 2,
     ["is not 'METRIC < NUMBER'"]),
    ("compare: no condition", ["compare", "{results}", "{results}"], 2, ["give at least one --fail-if"]),
    ("slices: unknown column", ["slices", "{results}", "--by", "colour"], 2,
     ["unknown slice column 'colour'", "Valid question columns: document"]),
    ("compare: missing folder", ["compare", "{d}/nowhere", "{results}", "--fail-if", "mrr < 0"], 2,
     ["no results folder at"]),
    ("ingest: missing path", ["ingest", "{d}/nofile.txt", "--corpus", "c"], 1, ["nofile.txt: not found"]),
    ("ingest: empty folder", ["ingest", "{d}/emptydir", "--corpus", "c"], 1, ["nothing to ingest", "emptydir"]),
    ("ingest: only bad files", ["ingest", "{d}/blank.txt", "--corpus", "c"], 1, ["blank.txt: empty file"]),
    ("ingest: bad corpus name", ["ingest", "{d}/good.yaml", "--corpus", "../up"], 2,
     ["corpus name '../up' is invalid"]),
    ("ingest: no --corpus", ["ingest", "{d}/good.yaml"], USAGE, ["--corpus"]),
    ("corpus: delete unknown", ["corpus", "delete", "nosuch"], 2, ["unknown corpus 'nosuch'"]),
    ("corpus: unknown subcommand", ["corpus", "purge"], USAGE, ["'list', 'delete'"]),
    ("corpus: docs of unknown corpus", ["corpus", "docs", "nosuch"], 2, ["unknown corpus 'nosuch'"]),
    ("corpus: delete-doc in unknown corpus", ["corpus", "delete-doc", "nosuch", "a.txt"], 2,
     ["unknown corpus 'nosuch'"]),
    ("corpus: delete-doc without doc ids", ["corpus", "delete-doc", "nosuch"], USAGE, ["DOC_ID"]),
    ("dashboard: port not a number", ["dashboard", "--port", "http"], USAGE, ["port must be a number from 1 to 65535"]),
    ("dashboard: port out of range", ["dashboard", "--port", "99999"], USAGE, ["'99999'"]),
    ("dashboard: remote without flag", ["dashboard", "--host", "0.0.0.0"], 2,
     ["--host 0.0.0.0", "--allow-remote", "127.0.0.1"]),
    ("labels: missing folder", ["labels", "pool", "{d}/nowhere"], 2, ["no results folder at", "nowhere"]),
    ("labels: unknown run", ["labels", "pool", "{results}", "--runs", "nosuchrun"], 2, ["nosuchrun", "Valid runs"]),
    ("labels: k 0", ["labels", "pool", "{results}", "--k", "0"], 2, ["--k 0", "greater than or equal to 1"]),
    ("labels: no pool yet", ["labels", "sheet", "{results}", "--out", "{d}/sheet.csv"], 2,
     ["no pool in", "ragkit labels pool"]),
    ("labels: unknown grades", ["labels", "export", "{results}", "--grades", "mine"], USAGE,
     ["'human', 'judge', 'combined'"]),
    ("labels: resamples 5", ["labels", "agreement", "{results}", "--resamples", "5"], USAGE,
     ["resamples must be a number from 100 to 100000"]),
    ("ragkit: unknown command", ["serve"], USAGE, ["'ingest', 'corpus', 'run', 'summary'"]),
    ("questions: unknown type", ["questions", "generate", "{d}/beir", "--types", "trivia", "--dry-run"], 2,
     ["--types", "unknown question type(s) trivia", "valid: factoid, paraphrase, multi_hop, unanswerable"]),
    ("questions: unknown corpus", ["questions", "generate", "nosuch", "--dry-run"], 2, ["unknown corpus 'nosuch'"]),
    ("questions: check missing set", ["questions", "check", "{d}/nowhere.jsonl"], 2, ["question set not found"]),
    ("questions: unknown export format", ["questions", "export", "{d}/beir", "--to", "xml", "--out", "{d}/x"], USAGE,
     ["'ragas', 'llamaindex', 'beir', 'trec'"]),
    ("questions: review unknown id", ["questions", "review", "{d}/beir", "--accept", "q9"], 2,
     ["expected file not found"]),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, str]:
    """The bad files, and a real results folder (a bm25-only experiment of two runs)."""
    from ragkit.experiments.config import load_config
    from ragkit.experiments.runner import run_experiment
    from ragkit.settings import get_settings

    folder = tmp_path_factory.mktemp("bad-inputs")
    beir = write_beir(folder / "beir")
    good = GOOD.format(beir=beir)
    (folder / "good.yaml").write_text(good, encoding="utf-8")
    for name, make in BAD_FILES.items():
        (folder / name).write_text(make(good), encoding="utf-8")
    (folder / "latin1.yaml").write_bytes("name: café\n".encode("latin-1"))
    (folder / "blank.txt").write_bytes(b"")
    (folder / "emptydir").mkdir()
    with pytest.MonkeyPatch.context() as patch:  # module scope: the per-test data dir is not set yet
        patch.setenv("RAGKIT_DATA_DIR", str(folder / "data"))
        get_settings.cache_clear()
        report = run_experiment(load_config(folder / "good.yaml"), folder / "results")
        get_settings.cache_clear()
    assert not report.errors
    return {"d": str(folder), "results": str(folder / "results")}


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_clear_error(err: str, out: str, fragments: list[str], one_line: bool) -> None:
    assert "Traceback" not in err and "Traceback" not in out
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in stderr:\n{err}"
    if one_line:
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err


@pytest.mark.parametrize(("argv", "code", "fragments"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_is_one_clear_error(workspace, capsys, argv, code, fragments):
    got, out, err = run_cli([arg.format(**workspace) for arg in argv], capsys)
    assert got == (2 if code == USAGE else code), err
    assert_clear_error(err, out, fragments, one_line=code != USAGE)


def test_the_table_covers_every_command():
    from ragkit.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # argparse lists subcommands nowhere public
    tried = {case[1][0] for case in CASES} | {" ".join(case[1][:2]) for case in CASES if case[1][0] == "corpus"}
    assert set(commands) <= tried
    assert {"corpus delete"} <= tried
    assert len(CASES) >= 25


@pytest.mark.parametrize(
    ("variable", "value", "fragments"),
    [
        ("RAGKIT_MAX_FILE_MB", "lots", ["RAGKIT_MAX_FILE_MB", "valid number", "'lots'"]),
        ("RAGKIT_ALLOWED_TYPES", "pdf", ["allowed_types", "as JSON"]),
    ],
)
def test_bad_environment_setting_is_named(monkeypatch, capsys, variable, value, fragments):
    from ragkit.settings import get_settings

    monkeypatch.setenv(variable, value)
    get_settings.cache_clear()
    code, out, err = run_cli(["corpus", "list"], capsys)
    assert code == 2
    assert_clear_error(err, out, fragments, one_line=True)


@pytest.mark.parametrize(
    ("failure", "code", "fragments"),
    [
        (RuntimeError("the index vanished\nsecond line"), 1, ["unexpected RuntimeError: the index vanished",
                                                           "this is a bug in ragkit", "the full traceback is in"]),
        (KeyboardInterrupt(), 130, ["interrupted; run the same command again to resume"]),
    ],
    ids=["bug", "ctrl-c"],
)
def test_an_unexpected_failure_is_one_line_with_the_traceback_in_a_log(
    monkeypatch, capsys, isolated_data_dir, failure, code, fragments
):
    import ragkit.experiments.config

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(ragkit.experiments.config, "load_config", fail)
    got, _, err = run_cli(["run", "anything.yaml"], capsys)
    assert got == code
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err
    if code == 1:
        log = Path(err.rsplit("the full traceback is in ", 1)[1].strip())
        assert log.parent == isolated_data_dir / "logs"
        assert "Traceback" in log.read_text(encoding="utf-8") and "the index vanished" in log.read_text()


@pytest.mark.parametrize(
    ("argv", "env", "fragments"),
    [
        (["run", "{d}/syntax.yaml"], {}, ["syntax.yaml, line 3, column 6: invalid YAML"]),
        (["dashboard", "--host", "0.0.0.0"], {}, ["--allow-remote"]),
        (["corpus", "list"], {"RAGKIT_EMBED_BATCH_SIZE": "0"}, ["RAGKIT_EMBED_BATCH_SIZE"]),
    ],
    ids=["yaml syntax", "remote dashboard", "bad setting"],
)
def test_a_real_process_shows_no_traceback(workspace, isolated_data_dir, argv, env, fragments):
    result = subprocess.run(
        [sys.executable, "-m", "ragkit.cli", *(arg.format(**workspace) for arg in argv)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False,
        env={**os.environ, "RAGKIT_DATA_DIR": str(isolated_data_dir), **env},
    )
    assert result.returncode == 2, result.stderr
    assert_clear_error(result.stderr, result.stdout, fragments, one_line=True)
