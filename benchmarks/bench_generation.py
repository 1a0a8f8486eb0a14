"""Generated question sets against people's: do they rank configurations as a human set does?

    python benchmarks/bench_generation.py [--work DIR] [--questions 100] [--covidqa-articles 30]
        [--scifact-distractors 100] [--extractive-n 100] [--local-n 0] [--bootstrap 1000]

Bounded, so that it runs in minutes on a shared 2-core machine (every figure says its sample):
COVID-QA (/work/shared/datasets/covidqa: 98 articles, 1,380 human questions with answer spans)
cut to ``--covidqa-articles`` seeded articles and ``--questions`` seeded human questions of
theirs; SciFact (/work/shared/datasets/scifact/beir) cut to ``--questions`` seeded test claims,
the abstracts they cite and ``--scifact-distractors`` seeded others. On each it

1. generates a set from the corpus with each available method: ``extractive`` (no LLM), the
   embedded SmolLM2-135M (``local``; ``--local-n`` questions of types factoid and paraphrase only,
   since it takes seconds a call and keeps few), and Ollama when a server answers;
2. runs one grid of 12 configurations (token chunks of 256 and 512 x bm25, dense, hybrid with RRF k
   60 and 5, MMR with lambda 0.5 and 0.9; MiniLM; top_k 10) on
   every set, human and generated, over the same corpus (content keys share the chunk sets and
   indexes between sets);
3. reports Kendall's tau-b (scipy.stats.kendalltau) between the configurations' means on a
   generated set and on the human set, for nDCG@10 and recall@5 (document level), with a
   percentile bootstrap interval (questions of both sets resampled), beside the set's keep rate,
   junk share (replies dropped as about the text, prompt echo, no content word, not a question,
   invalid, or duplicate/template, of those asked), span accuracy (kept answers that are their
   document's text at their span, checked here) and seconds.

Writes ``<work>/generation_bench.json`` and prints the table for benchmarks/README.md. A rerun
with the same ``--work`` reuses the sets, the LLM cache and the results (nothing is recomputed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COVIDQA = Path("/work/shared/datasets/covidqa")
SCIFACT = Path("/work/shared/datasets/scifact/beir")
METRICS = ("ndcg@10", "recall@5")
JUNK = ("about_the_text", "prompt_echo", "no_content_word", "not_a_question", "empty_question", "invalid_reply",
        "duplicate")
# 2 chunkers x 6 retrievers: 12 configurations and only 2 chunk sets to embed (embedding is what
# this costs on a loaded machine: 615 chunks took 11 minutes at a load average of 20).
GRID = {
    "chunkers": [
        {"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 0}},
        {"type": "token", "params": {"chunk_size": 512, "chunk_overlap": 0}},
    ],
    "embedders": ["minilm"],
    "retrievers": ["bm25", "dense",
                   {"type": "hybrid", "params": {"rrf_k": 60}}, {"type": "hybrid", "params": {"rrf_k": 5}},
                   {"type": "mmr", "params": {"mmr_lambda": 0.5}}, {"type": "mmr", "params": {"mmr_lambda": 0.9}}],
    "top_k": [10],
}


def covidqa_subset(work: Path, source: Path, articles: int, questions: int, seed: int) -> Path:
    """A squad folder: ``articles`` seeded articles that have questions, and ``questions`` seeded
    human questions of theirs (0: all of both)."""
    folder = work / f"covidqa-{articles}-{questions}"
    if (folder / "questions.jsonl").is_file():
        return folder
    rng = random.Random(seed)
    rows = [json.loads(line) for line in (source / "questions.jsonl").read_text().splitlines() if line]
    corpus = [json.loads(line) for line in (source / "corpus.jsonl").read_text().splitlines() if line]
    asked = sorted({row["doc_id"] for row in rows})
    chosen = set(rng.sample(asked, articles) if articles else asked)
    rows = [row for row in rows if row["doc_id"] in chosen]
    rows = sorted(rng.sample(rows, questions) if questions and questions < len(rows) else rows, key=lambda r: r["id"])
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in corpus if doc["_id"] in chosen))
    (folder / "questions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def scifact_subset(work: Path, queries: int, distractors: int, seed: int) -> Path:
    """A BEIR folder: ``queries`` seeded test claims, their qrels, the abstracts they cite and
    ``distractors`` seeded other abstracts."""
    folder = work / f"scifact-{queries}-{distractors}"
    if (folder / "corpus.jsonl").is_file():
        return folder
    rng = random.Random(seed)
    qrels = [line.split("\t") for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:] if line]
    asked = sorted({query for query, _, _ in qrels})
    chosen = set(rng.sample(asked, queries) if queries and queries < len(asked) else asked)
    qrels = [row for row in qrels if row[0] in chosen]
    cited = {doc for _, doc, _ in qrels}
    rows = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").read_text().splitlines()]
    others = [row for row in rows if row["_id"] not in cited]
    rng.shuffle(others)
    keep = sorted([row for row in rows if row["_id"] in cited] + others[:distractors], key=lambda row: row["_id"])
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in keep))
    (folder / "queries.jsonl").write_text("".join(
        line + "\n" for line in (SCIFACT / "queries.jsonl").read_text().splitlines()
        if line and json.loads(line)["_id"] in chosen))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        "\t".join(row) + "\n" for row in qrels))
    return folder


def generate(name: str, method: str, corpus: Path, work: Path, n: int, llm: Any = None) -> tuple[Path, dict]:
    """The generated set's folder and its record (read back when it exists)."""
    from ragkit.questions.generation import GenerationParams, generate_questions, write_set
    from ragkit.questions.generation.extractive import generate_extractive
    from ragkit.questions.sources import load_corpus_source

    out = work / "sets" / f"{name}-{method}"
    if (out / "generation.json").is_file():
        return out, json.loads((out / "generation.json").read_text())
    source = load_corpus_source(str(corpus))
    if method == "extractive":
        result = generate_extractive(source.documents, GenerationParams(method="extractive", n=n, seed=0),
                                     corpus=source.name)
    else:
        params = GenerationParams(n=n, types=["factoid", "paraphrase"], seed=0)
        result = generate_questions(source.documents, params, llm, corpus=source.name)
    write_set(out, result.rows, result.record, source.corpus_file)
    return out, result.record


def span_accuracy(folder: Path) -> float | None:
    from ragkit.questions.generation import read_rows
    from ragkit.questions.sources import load_corpus_source

    texts = {d.id_: d.text for d in load_corpus_source(str(folder)).documents}
    rows = [row for row in read_rows(folder) if row.get("answer_start") is not None]
    if not rows:
        return None
    return sum(texts[r["doc_id"]][r["answer_start"]:r["answer_end"]] == r["answer"] for r in rows) / len(rows)


def run_grid(label: str, dataset: Path, format: str, work: Path, limit: int) -> tuple[np.ndarray, list[str], dict]:
    """{metric: questions x runs matrix}, run labels, seconds: the grid on one question set."""
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.results import ResultStore

    config = config_from_dict({"name": f"gen-{label}", **GRID,
                               "dataset": {"path": str(dataset), "format": format,
                                           **({"limit": limit} if limit else {})}}, source=label)
    out = work / "results" / f"{label}-g2"
    started = time.perf_counter()
    run_experiment(config, out)
    seconds = time.perf_counter() - started
    store = ResultStore(out)
    runs = store.read("runs")
    scores = store.read("scores", metrics=list(METRICS))
    names = {row["run_id"]: _label(row) for row in runs.to_dict("records")}
    order = sorted(names, key=names.get)
    matrices = {}
    for metric in METRICS:
        table = scores[scores["metric"] == metric].pivot_table(index="question_id", columns="run_id", values="value")
        matrices[metric] = table.reindex(columns=order).to_numpy(dtype=float)
    return matrices, [names[r] for r in order], {"seconds": seconds}


def _label(run: dict[str, Any]) -> str:
    extra = "".join(f" {name}={run[f'retriever.{name}']:g}" for name in ("rrf_k", "mmr_lambda")
                    if isinstance(run.get(f"retriever.{name}"), float) and run[f"retriever.{name}"] == run[
                        f"retriever.{name}"])
    return f"{run['chunker']}-{run['chunker.chunk_size']}/{run['retriever']}{extra}"


def tau_with_interval(generated: np.ndarray, human: np.ndarray, resamples: int, seed: int) -> dict[str, float]:
    """Kendall's tau-b of the runs' means (columns), and a 95% percentile bootstrap interval with
    the questions (rows) of each set resampled independently."""
    from scipy.stats import kendalltau

    def tau(a: np.ndarray, b: np.ndarray) -> float:
        value = kendalltau(np.nanmean(a, axis=0), np.nanmean(b, axis=0)).statistic
        return float(value)

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        g = generated[rng.integers(0, len(generated), len(generated))]
        h = human[rng.integers(0, len(human), len(human))]
        draws.append(tau(g, h))
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return {"tau": tau(generated, human), "low": float(low), "high": float(high)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragkit-bench-generation"))
    parser.add_argument("--extractive-n", type=int, default=100)
    parser.add_argument("--local-n", type=int, default=0, help="questions asked of the embedded model (0: none)")
    parser.add_argument("--questions", type=int, default=100, help="seeded human questions per dataset (0: all)")
    parser.add_argument("--covidqa-articles", type=int, default=30, help="seeded COVID-QA articles (0: all 98)")
    parser.add_argument("--scifact-distractors", type=int, default=100, help="abstracts no sampled claim cites")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--datasets", default="covidqa,scifact")
    parser.add_argument("--covidqa", type=Path, default=COVIDQA,
                        help="a squad folder (a smoke run: datasets/covidqa_sample)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAGKIT_DATA_DIR", str(args.work / "data"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from ragkit.llms import LLMClient
    from ragkit.llms.defaults import ollama_answers
    from ragkit.llms.local import LocalLLM, LocalParams
    from ragkit.settings import get_settings

    settings = get_settings()
    clients: dict[str, Any] = {}
    local = LocalLLM(LocalParams())
    if local.problem() is None:
        clients["local"] = LLMClient(local, settings.resolved_data_dir() / "llm_cache")
    else:
        print(f"embedded model unavailable: {local.problem()}")
    if ollama_answers(settings.ollama_url, 0.5):
        from ragkit.llms.ollama import OllamaLLM, OllamaParams

        clients["ollama"] = LLMClient(OllamaLLM(OllamaParams(base_url=settings.ollama_url,
                                                             model=settings.ollama_model)),
                                      settings.resolved_data_dir() / "llm_cache")
    else:
        print(f"no Ollama at {settings.ollama_url}: that method is left out")

    if args.local_n == 0:
        clients.pop("local", None)
    datasets = {
        "covidqa": (covidqa_subset(args.work, args.covidqa, args.covidqa_articles, args.questions, 0), "squad"),
        "scifact": (scifact_subset(args.work, args.questions, args.scifact_distractors, 0), "beir"),
    }
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "grid": GRID, "datasets": {}}
    for name in args.datasets.split(","):
        corpus, format = datasets[name]
        human, labels, human_time = run_grid(f"{name}-human", corpus, format, args.work, 0)
        entry: dict[str, Any] = {"configurations": labels, "human": {
            "questions": int(human[METRICS[0]].shape[0]), "grid_seconds": human_time["seconds"],
            "means": {m: np.nanmean(human[m], axis=0).round(4).tolist() for m in METRICS}}, "methods": {}}
        for method in ["extractive", *clients]:
            n = args.extractive_n if method == "extractive" else args.local_n if method == "local" else args.questions
            started = time.perf_counter()
            folder, record = generate(name, method, corpus, args.work, n, clients.get(method))
            dropped = record.get("dropped_by_reason", {})
            row: dict[str, Any] = {
                "asked": n, "kept": record["kept"], "keep_rate": record["kept"] / n,
                "junk_share": sum(dropped.get(reason, 0) for reason in JUNK) / n,
                "dropped_by_reason": dropped, "span_accuracy": span_accuracy(folder),
                "generation_seconds": record.get("seconds", time.perf_counter() - started),
                "by_type": record.get("by_type"),
            }
            if record["kept"] >= 2:
                generated, generated_labels, generated_time = run_grid(f"{name}-{method}", folder, "squad",
                                                                       args.work, 0)
                assert generated_labels == labels, (generated_labels, labels)
                row["grid_seconds"] = generated_time["seconds"]
                row["means"] = {m: np.nanmean(generated[m], axis=0).round(4).tolist() for m in METRICS}
                for metric in METRICS:
                    row[metric] = tau_with_interval(generated[metric], human[metric], args.bootstrap, 0)
            entry["methods"][method] = row
            print(json.dumps({name: {method: {k: v for k, v in row.items() if k != "means"}}}, default=str))
        report["datasets"][name] = entry
        (args.work / "generation_bench.json").write_text(json.dumps(report, indent=2, default=str))
    print_table(report)


def print_table(report: dict[str, Any]) -> None:
    print("| dataset | method | kept of asked | junk share | span accuracy | generation s | grid s | "
          "tau nDCG@10 [95% CI] | tau recall@5 [95% CI] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, entry in report["datasets"].items():
        for method, row in entry["methods"].items():
            taus = [f"{row[m]['tau']:.2f} [{row[m]['low']:.2f}, {row[m]['high']:.2f}]" if m in row else "n/a"
                    for m in METRICS]
            accuracy = "n/a" if row["span_accuracy"] is None else f"{row['span_accuracy']:.0%}"
            print(f"| {name} | {method} | {row['kept']} of {row['asked']} ({row['keep_rate']:.0%}) | "
                  f"{row['junk_share']:.0%} | {accuracy} | {row['generation_seconds']:.0f} | "
                  f"{row.get('grid_seconds', 0):.0f} | {taus[0]} | {taus[1]} |")


if __name__ == "__main__":
    main()
