"""The dry run's counts are what the run then does, on an experiment that is half cached.

Real chunkers, the real MiniLM and LanceDB on three documents of the bundled sample; the
generator's LLM is a counting stub (its calls are what is compared, not its answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
import yaml

from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.estimate import NO_MEASUREMENT, dry_run, format_estimate
from ragkit.experiments.runner import run_experiment
from ragkit.experiments.throughput import read_throughput
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from tests.factories import tiny_experiment

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
DOCS = ("1545", "1546", "1550")


class CountParams(LLMParams):
    model: str = "count"


class CountingLLM(LLMBackend):
    name: ClassVar[str] = "count"
    Params: ClassVar[type[ComponentParams]] = CountParams

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        return BackendReply(text=json.dumps({"answer": "See [1].", "citations": [1]}), prompt_tokens=3,
                            completion_tokens=2)


@pytest.fixture
def counting_llm():
    with llms.registered("count", CountingLLM):
        yield


def _small_sample(folder: Path) -> Path:
    folder.mkdir()
    lines = (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "corpus.jsonl").write_text("\n".join(line for line in lines if json.loads(line)["_id"] in DOCS) + "\n",
                                         encoding="utf-8")
    questions = [line for line in (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if json.loads(line)["doc_id"] in DOCS]
    (folder / "questions.jsonl").write_text("\n".join(questions[:6]) + "\n", encoding="utf-8")
    return folder


def dry_grid(dataset: Path, chunkers: list, top_k: list[int], limit: int) -> dict:
    """Dense and bm25 over MiniLM, answers by the counting LLM, for the first ``limit`` questions."""
    return tiny_experiment({"path": str(dataset), "format": "squad", "limit": limit}, "dry", chunkers=chunkers,
                           embedders=["minilm"], retrievers=["dense", "bm25"], top_k=top_k, generator=True,
                           llm={"default": "count"}, shard_size=2)


def _generator_calls(out: Path) -> int:
    stages = ResultStore(out).read("stages")
    return int(pd.to_numeric(stages.loc[stages["stage"] == "generate", "llm_calls"]).sum())


def test_dry_run_counts_equal_what_the_half_cached_run_then_does(tmp_path, counting_llm):
    dataset = _small_sample(tmp_path / "sample")
    out = tmp_path / "out"
    token = {"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}
    # No measurement yet and no calibration: the estimate says so rather than inventing a rate.
    first = dry_run(config_from_dict(dry_grid(dataset, [token], [3], 4)), out, calibrate_first=False)
    assert first.embedding[0].measured == NO_MEASUREMENT and first.seconds is None
    run_experiment(config_from_dict(dry_grid(dataset, [token], [3], 4)), out)
    measured = read_throughput(get_settings().resolved_data_dir())
    assert [m.label for m in measured["embedders"].values()] == ["minilm"]
    assert [m.label for m in measured["llms"].values()] == ["count:count"]
    calls_before = _generator_calls(out)

    # Half cached: a chunk set, an index and 4 of 6 questions of two runs are done; a new
    # chunker, a new top_k and two more questions are not.
    grown = tmp_path / "grown.yaml"
    recursive = {"type": "recursive", "params": {"chunk_size": 400, "chunk_overlap": 0}}
    grown.write_text(yaml.safe_dump(dry_grid(dataset, [token, recursive], [3, 4], 6)), encoding="utf-8")
    assert main(["run", str(grown), "--out", str(out), "--dry-run", "--format", "json"]) == 0
    estimate = dry_run(config_from_dict(dry_grid(dataset, [token, recursive], [3, 4], 6)), out)
    report = run_experiment(config_from_dict(dry_grid(dataset, [token, recursive], [3, 4], 6)), out)

    assert estimate.runs == report.runs_total == 8
    assert estimate.runs_to_compute == report.runs_computed == 8
    assert estimate.questions_to_compute == report.questions_computed == 8 * 6 - 2 * 4
    assert (estimate.chunk_sets_to_build, estimate.indexes_to_build) == (report.chunksets_built,
                                                                          report.indexes_built) == (1, 2)
    assert [s.cached for s in estimate.chunk_sets] == [True, False]
    assert estimate.chunks_to_embed == report.chunks_embedded > 0
    assert estimate.llm_calls == {"generator": _generator_calls(out) - calls_before}
    assert estimate.embedding[0].measured != NO_MEASUREMENT and estimate.seconds is not None

    again = dry_run(config_from_dict(dry_grid(dataset, [token, recursive], [3, 4], 6)), out)
    assert (again.runs_to_compute, again.chunk_sets_to_build, again.chunks_to_embed, again.llm_calls) == (0, 0, 0, {})


def test_cli_dry_run_prints_the_plan_and_writes_no_results(tmp_path, counting_llm, capsys):
    dataset = _small_sample(tmp_path / "sample")
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(dry_grid(dataset, ["token"], [3], 2)), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "to compute: 2 run(s), 4 question(s)" in text and "generator 4" in text
    # A first dry run calibrates: a time, not "no measurement yet".
    assert NO_MEASUREMENT not in text and "a first-use calibration)" in text and "unknown" not in text
    assert not (tmp_path / "out").exists()
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--dry-run", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["questions_to_compute"] == 4


class TallyLLM(CountingLLM):
    """The counting stub, tallying what each call was for (chunk summaries, document profiles,
    everything else), read from the prompt."""

    name: ClassVar[str] = "tally"
    asked: ClassVar[list[str]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        text = " ".join(str(message.get("content", "")) for message in messages).lower()
        self.asked.append("profile" if "technical_density" in text and "opening" in text
                          else "summary" if "summar" in text else "other")
        return super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)


def test_dry_run_counts_the_calls_made_once_per_chunk_set_and_corpus(tmp_path):
    """Chunk summaries (one call per chunk) and document profiles (one per document), counted
    before the run and equal to the calls the run then makes for them."""
    dataset = _small_sample(tmp_path / "sample")
    config = {**dry_grid(dataset, [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 0,
                                                               "summaries": True}}], [3], 2),
              "retrievers": ["hybrid"], "generator": False, "llm": {"default": "tally"},
              "judges": {"strategy": "heuristic", "profile": {"mode": "llm", "params": {"documents": "mode"}}}}
    TallyLLM.asked.clear()
    with llms.registered("tally", TallyLLM):
        estimate = dry_run(config_from_dict(config), tmp_path / "out")
        run_experiment(config_from_dict(config), tmp_path / "out")
        again = dry_run(config_from_dict(config), tmp_path / "other-out")
    chunks = len(pd.read_parquet(next((get_settings().resolved_data_dir() / "derived").rglob("chunksets/*.parquet"))))
    assert estimate.llm_calls["chunking"] == TallyLLM.asked.count("summary") == chunks > 0
    assert TallyLLM.asked.count("profile") == len(DOCS)
    # The query side of the profile judge is one call per question on top of the documents' ones.
    assert estimate.llm_calls["profile"] == len(DOCS) + estimate.questions_to_compute
    # Built and written now: a second results folder needs neither again.
    assert "chunking" not in again.llm_calls
    assert again.llm_calls.get("profile", 0) in (again.questions_to_compute, again.questions_to_compute + len(DOCS))


def test_a_first_dry_run_calibrates_so_it_has_a_time(tmp_path, counting_llm):
    dataset = _small_sample(tmp_path / "sample")
    token = {"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}
    estimate = dry_run(config_from_dict(dry_grid(dataset, [token], [3], 4)), tmp_path / "out")
    # Measured now: a few dozen chunks embedded, one short prompt; kept in throughput.json.
    assert estimate.seconds is not None and estimate.seconds > 0
    assert estimate.embedding[0].measured != NO_MEASUREMENT and estimate.llm[0].measured != NO_MEASUREMENT
    measured = read_throughput(get_settings().resolved_data_dir())
    assert [m.label for m in measured["embedders"].values()] == ["minilm (calibration)"]
    assert [(m.label, m.items) for m in measured["llms"].values()] == [("count:count (calibration)", 1)]
    assert 1 <= next(iter(measured["embedders"].values())).items <= 32
    assert "unknown" not in format_estimate(estimate)
    # Measured once: a second dry run adds nothing.
    dry_run(config_from_dict(dry_grid(dataset, [token], [3], 4)), tmp_path / "out")
    assert read_throughput(get_settings().resolved_data_dir()) == measured
