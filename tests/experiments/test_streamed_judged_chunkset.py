"""The Chunking Judge's chunk set built a batch of documents at a time (``build_window_rows``) is
the whole-frame build's: the same file (byte for byte within one window, the same table across
row groups), the same decisions in the same order, written before the chunk set is published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ragkit.artefacts import chunksets
from ragkit.artefacts.chunksets import build_judged_chunkset_streamed, chunk_judged
from ragkit.chunkers import chunkers
from ragkit.corpus.model import Corpus
from ragkit.questions.corpus import dataset_corpus_rows
from ragkit.registry import ComponentSpec
from ragkit.storage.atomic import write_parquet_atomic

pytestmark = pytest.mark.unit

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
SIZES = (96, 160, 256)


class Decision:
    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row

    def as_row(self) -> dict[str, Any]:
        return dict(self.row)


class ScriptedJudge:
    """Picks a token chunker size by the document's length (three chunkers across the corpus, so
    a chunker made in one batch is reused in later ones); counts the chunkers it has built."""

    def __init__(self) -> None:
        self.chunkers_built = 0

    def decide(self, document: Any) -> tuple[ComponentSpec, Decision]:
        size = SIZES[len(document.text) % len(SIZES)]
        spec = ComponentSpec(type="token", params={"chunk_size": size, "chunk_overlap": 8})
        return spec, Decision({"judge": "chunking", "decision": json.dumps({"chunk_size": size})})

    def build_chunker(self, spec: ComponentSpec) -> Any:
        self.chunkers_built += 1
        return chunkers.build(spec)


def sample_corpus() -> Corpus:
    rows = dataset_corpus_rows(SAMPLE_DATASET)
    assert rows is not None
    return Corpus.from_documents("covidqa_sample", rows)


def test_judged_chunk_set_streamed_is_the_whole_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunksets, "STREAM_DOCUMENTS", 4)  # the sample's 18 documents in 5 batches
    corpus = sample_corpus()
    judge = ScriptedJudge()
    whole, decisions = chunk_judged(corpus, judge.decide, judge.build_chunker)
    write_parquet_atomic(tmp_path / "whole.parquet", whole)
    assert len({d["decision"] for d in decisions}) == len(SIZES) and len(decisions) == len(corpus.documents)
    assert len(whole) > 300

    published: list[bool] = []
    streamed = ScriptedJudge()
    got, built = build_judged_chunkset_streamed(
        tmp_path / "one.parquet", tmp_path / "one.decisions.json", corpus, streamed.decide,
        streamed.build_chunker, 65_536,
        before_publish=lambda: published.append((tmp_path / "one.parquet").exists()))
    assert built and published == [False]  # called once, before the chunk set is there
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert got == decisions == json.loads((tmp_path / "one.decisions.json").read_text(encoding="utf-8"))
    assert streamed.chunkers_built == len(SIZES)  # one per spec across batches, as the whole build

    got, built = build_judged_chunkset_streamed(
        tmp_path / "windows.parquet", tmp_path / "windows.decisions.json", corpus, judge.decide,
        judge.build_chunker, 100)
    windowed = pq.ParquetFile(tmp_path / "windows.parquet")
    assert built and windowed.num_row_groups == -(-len(whole) // 100)
    assert windowed.read().equals(pq.read_table(tmp_path / "whole.parquet"), check_metadata=True)
    assert got == decisions

    again = ScriptedJudge()
    got, built = build_judged_chunkset_streamed(
        tmp_path / "windows.parquet", tmp_path / "windows.decisions.json", corpus, again.decide,
        again.build_chunker, 100)
    assert not built and got == decisions and again.chunkers_built == 0  # there: read, not rebuilt


def test_a_failed_judged_build_publishes_neither_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunksets, "STREAM_DOCUMENTS", 4)
    judge = ScriptedJudge()
    seen: list[str] = []

    def decide(document: Any) -> tuple[ComponentSpec, Decision]:
        seen.append(document.id_)
        if len(seen) == 10:
            raise RuntimeError("judge failed")
        return judge.decide(document)

    with pytest.raises(RuntimeError, match="judge failed"):
        build_judged_chunkset_streamed(tmp_path / "c.parquet", tmp_path / "c.decisions.json", sample_corpus(),
                                       decide, judge.build_chunker, 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def judged_run(data_dir: Path, monkeypatch: pytest.MonkeyPatch, window_rows: int) -> dict[str, Any]:
    """The heuristic Chunking Judge over the sample (20 questions, bm25) in a fresh data directory."""
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.results import ResultStore
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(window_rows))
    get_settings.cache_clear()
    config = config_from_dict({
        "name": "judged-stream", "dataset": {"path": str(SAMPLE_DATASET), "format": "beir", "limit": 20},
        "chunkers": [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}],
        "embedders": [], "retrievers": ["bm25"], "top_k": [5], "judges": {"chunking": "heuristic"},
    })
    report = run_experiment(config, data_dir / "out")
    assert not report.errors, report.errors
    store = ResultStore(data_dir / "out")
    derived = next((data_dir / "derived").iterdir())
    [chunkset] = (derived / "chunksets").glob("*.parquet")
    decisions = json.loads(next((derived / "chunksets").glob("*.decisions.json")).read_text(encoding="utf-8"))
    judgements = store.read("judgements").drop(columns=["seconds"])
    judgements = judgements.sort_values(["run_id", "question_id", "decision"]).reset_index(drop=True)
    retrievals = store.read("retrievals").drop(columns=["seconds"], errors="ignore")
    return {"chunkset": chunkset, "decisions": [{k: v for k, v in d.items() if k != "seconds"} for d in decisions],
            "judgements": judgements, "ids": sorted(store.read("runs")["run_id"]),
            "retrievals": retrievals.sort_values(["run_id", "question_id", "rank"]).reset_index(drop=True)}


@pytest.mark.integration
def test_a_judged_run_streamed_builds_and_finds_what_the_whole_build_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = judged_run(tmp_path / "whole", monkeypatch, 0)
    streamed = judged_run(tmp_path / "streamed", monkeypatch, 50)
    assert streamed["ids"] == whole["ids"]
    assert pq.ParquetFile(streamed["chunkset"]).num_row_groups > 1  # it did stream in windows
    assert pq.read_table(streamed["chunkset"]).equals(pq.read_table(whole["chunkset"]), check_metadata=True)
    assert streamed["decisions"] == whole["decisions"] and len(whole["decisions"]) == 18
    assert streamed["judgements"].equals(whole["judgements"])
    assert len(whole["retrievals"]) > 0 and streamed["retrievals"].equals(whole["retrievals"])
