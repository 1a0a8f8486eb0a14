"""LLM calls a plan makes once per corpus or chunk set rather than per question, for the dry run.

- Chunk summaries (a chunker with ``summaries`` on): one call per chunk of each chunk set to
  build, counted by cutting the corpus without them (cheap: no LLM); ``by_file_type`` also asks
  one summary per document (its ``doc_summary``). A chunker that splits with an LLM
  (``llm_semantic``) or the Chunking Judge cannot be counted before it runs: those stay out, as
  their chunks do in the embedding estimate.
- Document profiles (the profile judge in llm mode with ``documents: mode``): one call per
  document, once per corpus and model, unless the profile file is already written.
- The router's summaries (the router in llm mode with ``summary: llm``): one call for the corpus
  summary and, with ``summary_scope: document``, one per document, once per corpus and model,
  unless their files are already written.

These are calls the backend is asked for; the LLM cache can answer repeats without it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ragkit.experiments.plan import Plan, RunStep, chunker_uses_llm, component_key
from ragkit.llms.base import llms as llm_registry
from ragkit.registry import ComponentSpec

CHUNKING, PROFILE, ROUTER = "chunking", "profile", "router"


def summary_calls(plan: Plan, to_build: set[str], count_chunks: Any) -> list[tuple[ComponentSpec, str, int]]:
    """(chunking LLM, role, calls) of the chunk sets ``to_build`` whose chunker writes summaries.
    ``count_chunks(spec)``: the chunks ``spec`` cuts the corpus into."""
    out = []
    for step in plan.chunk_steps:
        if step.chunkset_id not in to_build or step.judge is not None or step.judge_llm is None:
            continue
        if not step.chunker.params.get("summaries") or not _counts_before_running(step.chunker):
            continue
        plain = step.chunker.model_copy(update={"params": {**step.chunker.params, "summaries": False}})
        calls = count_chunks(plain)
        if step.chunker.type == "by_file_type":
            calls += len(plan.corpus.documents)
        out.append((step.judge_llm, CHUNKING, calls))
    return out


def profile_calls(plan: Plan, active: list[RunStep], profiles_dir: Path) -> list[tuple[ComponentSpec, str, int]]:
    """(profile LLM, role, calls) of the document profiles the active runs would write: one call per
    document, once per model, where the profile file is missing."""
    from ragkit.corpus.profile import profile_path, profile_variant

    out, seen = [], set()
    for run in active:
        spec = run.point.judge(PROFILE)
        llm = run.llms.get(PROFILE)
        if spec is None or llm is None or spec.params.get("documents", "mode") != "mode":
            continue
        key = component_key(llm_registry, llm)
        if key in seen:
            continue
        seen.add(key)
        backend = llm_registry.build(llm)
        model = f"{backend.name}:{backend.model_name}"
        design = {name: spec.params[name] for name in ("taxonomy", "sample", "sample_chars") if name in spec.params}
        if not profile_path(plan.corpus.corpus_id, profiles_dir, "llm", model,
                            profile_variant("llm", **design)).exists():
            out.append((llm, PROFILE, len(plan.corpus.documents)))
    return out


def router_summary_calls(plan: Plan, active: list[RunStep],
                         summaries_dir: Path) -> list[tuple[ComponentSpec, str, int]]:
    """(router LLM, role, calls) of the summaries the active runs' routers would write by the model:
    the corpus summary (one call) and, with ``summary_scope: document``, each document's (one call
    per document), once per model, where the file is missing."""
    from ragkit.corpus.document_summary import document_summary_path
    from ragkit.corpus.summary import summary_path

    out = []
    asked: set[tuple[str, str]] = set()  # (model, corpus or documents) counted already
    for run in active:
        spec = run.point.judge(ROUTER)
        llm = run.llms.get(ROUTER)
        if spec is None or llm is None or spec.params.get("summary", "heuristic") != "llm":
            continue
        backend = llm_registry.build(llm)
        model = f"{backend.name}:{backend.model_name}"
        corpus_id = plan.corpus.corpus_id
        calls = 0
        if (model, "corpus") not in asked and not summary_path(summaries_dir, corpus_id, "llm", model).exists():
            calls += 1
        if spec.params.get("summary_scope", "corpus") == "document" and (model, "documents") not in asked \
                and not document_summary_path(summaries_dir, corpus_id, "llm", model).exists():
            calls += len(plan.corpus.documents)
            asked.add((model, "documents"))
        asked.add((model, "corpus"))
        if calls:
            out.append((llm, ROUTER, calls))
    return out


def by_backend(calls: list[tuple[ComponentSpec, str, int]]) -> dict[str, tuple[ComponentSpec, dict[str, int]]]:
    """The calls grouped as ``_llm_calls`` groups its own: LLM key -> (spec, role -> calls)."""
    grouped: dict[str, tuple[ComponentSpec, dict[str, int]]] = {}
    for spec, role, count in calls:
        key = component_key(llm_registry, spec)
        entry = grouped.setdefault(key, (spec, defaultdict(int)))
        entry[1][role] += count
    return grouped


def _counts_before_running(chunker: ComponentSpec) -> bool:
    """Summaries aside, the chunker cuts without an LLM (else its chunks are unknown until it runs)."""
    return not chunker_uses_llm(chunker.model_copy(update={"params": {**chunker.params, "summaries": False}}))
