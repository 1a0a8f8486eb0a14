"""A finished experiment's re-run starts at once (issue 32 item 6): the commands that read results
import no model runtime. Each command runs in a fresh child interpreter, which then lists the heavy
packages it holds in ``sys.modules``; nothing is timed.

What stays on ``ragkit run``'s path, by design: pandas/pyarrow (the results tables) and
scipy.special (the summary's t intervals). LlamaIndex does not: a config is validated and planned
from each component's info class (``ragkit.registry``, ``ragkit.chunkers.params``), the corpus is
read as records, and the pipeline's modules load only for a run with questions left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.cli import main
from tests.conftest import SAMPLE_DATASET

REPO = Path(__file__).resolve().parents[2]
# Model runtimes and the index store: only a step that embeds, searches or generates needs them.
MODEL_RUNTIMES = ("torch", "sentence_transformers", "transformers", "lancedb", "lance", "scipy.stats",
                  "statsmodels", "ray", "llama_cpp", "onnxruntime", "playwright", "sklearn")

CHILD = """
import json, sys
from ragkit.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as stop:  # --help exits from argparse
    code = stop.code
print("HEAVY=" + json.dumps(sorted(name for name in json.loads(sys.argv[2]) if name in sys.modules)))
sys.exit(code)
"""


def heavy_imports_of(argv: list[str], watched: tuple[str, ...]) -> tuple[list[str], str]:
    """The ``watched`` packages a child interpreter has imported after ``ragkit <argv>``, and its output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv), json.dumps(watched)], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-2000:]
    line = next(line for line in child.stdout.splitlines() if line.startswith("HEAVY="))
    return json.loads(line.removeprefix("HEAVY=")), child.stdout


@pytest.fixture
def finished_results(tmp_path) -> tuple[Path, Path]:
    """A small experiment (one chunker, bm25) run to completion in this process."""
    config = tmp_path / "tiny.yaml"
    config.write_text(f"name: tiny\ndataset: {{path: {SAMPLE_DATASET}, format: squad, limit: 3}}\n"
                      "chunkers:\n  - type: token\n    params: {chunk_size: 256, chunk_overlap: 32}\n"
                      "  - type: recursive\n    params: {chunk_size: 1000, chunk_overlap: 200}\n"
                      "retrievers: [bm25]\ntop_k: [5]\n", encoding="utf-8")
    out = tmp_path / "results"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    return config, out


@pytest.mark.integration
def test_rerun_of_a_finished_experiment_imports_no_model_runtime_nor_llama_index(finished_results):
    config, out = finished_results
    heavy, output = heavy_imports_of(["run", str(config), "--out", str(out), "--quiet"],
                                     (*MODEL_RUNTIMES, "llama_index"))
    assert "nothing new to compute" in output
    assert heavy == []


@pytest.mark.integration
def test_rerun_with_an_ingested_corpus_imports_no_llama_index(tmp_path):
    """``corpus: {path: ...}`` ingests on every run (content-addressed, so a no-op here) and loads
    the corpus from the store: both as records, so the re-run still needs no LlamaIndex."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nCats purr when content. They sleep a lot.\n", encoding="utf-8")
    (docs / "dogs.md").write_text("# Dogs\n\nDogs bark at strangers. They like walks.\n", encoding="utf-8")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Why do cats purr?", "relevant_doc_ids": ["cats.md"],
                                     "answer": "when content"}) + "\n", encoding="utf-8")
    config = tmp_path / "ingested.yaml"
    config.write_text(f"name: ingested\ndataset: {{path: {questions}, format: jsonl}}\ncorpus: {{path: {docs}}}\n"
                      "chunkers: [recursive]\nretrievers: [bm25]\ntop_k: [5]\n", encoding="utf-8")
    out = tmp_path / "results"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    heavy, output = heavy_imports_of(["run", str(config), "--out", str(out), "--quiet"],
                                     (*MODEL_RUNTIMES, "llama_index"))
    assert "nothing new to compute" in output
    assert heavy == []


# A child that knows the tests' scripted LLM backend (the parent ran the grid with it), then runs
# the CLI like ``CHILD``: a finished re-run builds no backend but validates the config's llm specs.
SCRIPTED_CHILD = CHILD.replace("from ragkit.cli import main\n", "from ragkit.cli import main\n"
                               "from ragkit.llms.base import llms\nfrom tests.scripted_llm import ScriptedLLM\n"
                               "llms.register('scripted', ScriptedLLM)\n", 1)

# Every stage a bm25 grid can run without an embedder, and the generator: each stage's info class
# is read on a re-run, never its module (which imports LlamaIndex).
STAGED_CONFIG = """name: staged
dataset: {{path: {dataset}, format: squad, limit: 2}}
chunkers:
  - type: token
    params: {{chunk_size: 256, chunk_overlap: 32}}
retrievers: [bm25]
top_k: 5
llm: {{default: {{type: scripted}}}}
judges:
  router: heuristic
  condense: heuristic
  multi_query: llm
  quality_gate: heuristic
  retrieval: llm
  rerank: {{mode: [off, llm], params: {{top_n: 3}}}}
  compression: heuristic
  groundedness: llm
  answer_check: llm
generator:
  params: {{constrained: false, max_tokens: 20}}
"""


@pytest.mark.integration
def test_rerun_of_a_finished_grid_with_judges_and_a_generator_imports_no_model_runtime_nor_llama_index(tmp_path):
    """Issue 32 item 6 for stages: validating and planning read each stage's info class
    (``judges.info``), so the re-run of a finished grid with judges and a generator loads no stage
    module, and so neither LlamaIndex nor any model runtime."""
    from ragkit.llms.base import llms
    from tests.scripted_llm import ScriptedLLM

    config = tmp_path / "staged.yaml"
    config.write_text(STAGED_CONFIG.format(dataset=SAMPLE_DATASET), encoding="utf-8")
    out = tmp_path / "results"
    with llms.registered("scripted", ScriptedLLM):
        assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", SCRIPTED_CHILD, json.dumps(["run", str(config), "--out", str(out)]),
                            json.dumps([*MODEL_RUNTIMES, "llama_index"])], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "nothing new to compute" in child.stdout
    heavy = next(line for line in child.stdout.splitlines() if line.startswith("HEAVY="))
    assert json.loads(heavy.removeprefix("HEAVY=")) == []


@pytest.mark.unit
def test_planning_a_grid_of_every_built_in_chunker_and_retriever_imports_no_llama_index():
    """The quickstart's components and every other built-in chunker and retriever: validating the
    config, expanding the grid and computing each run's id read their info classes only."""
    chunker_names = ["token", "sentence", "recursive", "markdown", "code", "document", "by_file_type",
                     "llm_semantic", "semantic"]
    config = {"name": "all", "dataset": {"path": str(SAMPLE_DATASET), "format": "squad"},
              "chunkers": chunker_names, "embedders": ["minilm"],
              "retrievers": ["bm25", "dense", "hybrid", "mmr"], "top_k": [5, 10]}
    code = """
import json, sys
from ragkit.corpus.model import Corpus, make_record
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan
from ragkit.llms.base import llms
from ragkit.questions import QuestionSet
config = config_from_dict(json.loads(sys.argv[1]))
corpus = Corpus.from_documents("c", [make_record("d1", "Cats purr when content. " * 5)])
plan = make_plan(config, corpus, QuestionSet(name="q", format="jsonl", questions=[]),
                 {"chunking": llms.resolve("local")})
print(len(plan.runs), sorted(name for name in ("llama_index", "torch", "lancedb", "llama_cpp") if name in sys.modules))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", code, json.dumps(config)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-2000:]
    runs, heavy = child.stdout.split(maxsplit=1)
    assert int(runs) > 0 and heavy.strip() == "[]"


@pytest.mark.integration
def test_report_of_finished_results_imports_no_model_runtime(finished_results):
    _, out = finished_results
    heavy, _ = heavy_imports_of(["report", str(out), "--out", str(out.parent / "report.md")],
                                (*MODEL_RUNTIMES, "llama_index"))
    assert heavy == []


@pytest.mark.unit
def test_help_imports_no_model_runtime_nor_scipy():
    heavy, _ = heavy_imports_of(["--help"], (*MODEL_RUNTIMES, "llama_index", "scipy"))
    assert heavy == []


@pytest.mark.unit
def test_the_result_rows_and_the_trace_import_no_llama_index():
    """``experiments.rows`` names ``Trace`` at module level (a failed question's rows are scored on
    an empty one); ``ragkit.pipeline.trace`` imports the types it names for annotations only."""
    code = ("import sys\nimport ragkit.experiments.rows, ragkit.pipeline.trace\n"
            "print(sorted({name.split('.')[0] for name in sys.modules} & {'llama_index', 'torch', 'lancedb'}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "[]"
