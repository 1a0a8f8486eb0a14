"""Pipeline assembly: the objects that answer one run's questions, built from its grid point.

``assemble_pipeline`` gathers what the stages are built from (the retrievers over the run's
index, the LLM clients per role, the router's corpus summary, the profile judge's document
profiles); ``wire_pipeline`` is the one function that places judges in ``ragkit.pipeline.pipeline``, so a
change to how the pipeline is wired touches it alone. ``question_evaluator`` builds the run's
generation metrics, if it has any."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragkit.artefacts.index import ChunkIndex
from ragkit.corpus.document_summary import document_summaries
from ragkit.corpus.profile import ProfileMethod, corpus_profile
from ragkit.corpus.summary import SummaryMethod, corpus_summary
from ragkit.experiments.components import SharedComponents
from ragkit.experiments.config import GridPoint
from ragkit.experiments.evaluate import QuestionEvaluator
from ragkit.experiments.plan import EVALUATION, Plan, RunStep
from ragkit.llms.calls import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.registry import ComponentSpec
from ragkit.retrievers import retrievers as retriever_registry
from ragkit.retrievers.cache import RetrievalCache
from ragkit.retrievers.switchable import SwitchableRetriever
from ragkit.stages.base import STAGES as judge_registry
from ragkit.stages.wiring import wire_stages
from ragkit.web import web_providers


@dataclass(frozen=True)
class PipelineParts:
    """What one run's stages are built from, before any judge is placed."""

    point: GridPoint
    index: ChunkIndex
    embedder: Any | None
    base: Any  # the grid's retriever
    switchable: SwitchableRetriever | None  # the retrievers a strategy switch chooses from
    searchers: tuple[Any, ...]  # every retriever that searches the index (they share the cache)
    clients: dict[str, LLMClient]  # LLM client per role
    retrieval_cache: RetrievalCache
    corpus_summary: Callable[[SummaryMethod, LLMClient | None], Any]  # (method, llm) -> the router's summary
    # (method, llm) -> each document's summary, for a router that reads the question's document
    document_summaries: Callable[[SummaryMethod, LLMClient | None], Any]
    # (method, llm, design options) -> the document profiles the profile judge reads
    document_profiles: Callable[..., Any]


def assemble_pipeline(plan: Plan, run: RunStep, index: ChunkIndex, components: SharedComponents,
                      retrieval_cache: RetrievalCache, data_dir: Path) -> Pipeline:
    """The run's pipeline over ``index``, its components taken from ``components``."""
    point = run.point
    embedder = components.embedder(point.embedder) if point.embedder else None
    if embedder is not None:
        # Batched on first need, in the plan's order: see Embedder.expect_queries.
        embedder.expect_queries([q.text for q in plan.questions.questions])
    base = retriever_registry.build(point.retriever, index=index, embedder=embedder)
    switchable = switchable_retriever(point, base, index, embedder) if point.switches_strategy() else None
    searchers = [base, *(r for r in (switchable.retrievers.values() if switchable else ()) if r is not base)]
    for searcher in searchers:
        searcher.use_cache(retrieval_cache)
        searcher.share_searches(plan.search_depth(run.index_id, searcher.spec_dict()))
        searcher.use_semantic_store(data_dir / "semantic_cache")

    def summary(method: SummaryMethod, llm: LLMClient | None) -> Any:
        return corpus_summary(plan.corpus, data_dir / "summaries", method, llm)

    def per_document(method: SummaryMethod, llm: LLMClient | None) -> Any:
        return document_summaries(plan.corpus, data_dir / "summaries", method, llm)

    def profiles(method: ProfileMethod, llm: LLMClient | None, **design: Any) -> Any:
        return corpus_profile(plan.corpus, data_dir / "profiles", method, llm, **design)

    return wire_pipeline(PipelineParts(
        point=point, index=index, embedder=embedder, base=base, switchable=switchable, searchers=tuple(searchers),
        clients={role: components.llm_client(spec) for role, spec in run.llms.items()},
        retrieval_cache=retrieval_cache, corpus_summary=summary, document_summaries=per_document,
        document_profiles=profiles,
    ))


def wire_pipeline(parts: PipelineParts) -> Pipeline:
    """Each stage the grid point turns on, built with its role's LLM client and run in the role
    it declares (``ragkit.stages.roles``, wired by ``ragkit.stages.wiring``)."""
    point, clients = parts.point, parts.clients

    def judge(spec: ComponentSpec, **deps: Any) -> Any:
        return judge_registry.build(spec, llm=clients.get(spec.type), **deps)

    def summary(spec: ComponentSpec) -> Any:
        # Written once per corpus and model, then read from its file: a one-off cost like an
        # index build, kept out of the first question's router stage by a client of its own.
        method = spec.params.get("summary", "heuristic")
        llm = clients.get(spec.type)
        return parts.corpus_summary(method, llm.with_own_usage() if llm is not None and method == "llm" else None)

    def document_summaries(spec: ComponentSpec) -> Any:
        # Only a router that reads them asks for them: written once per corpus, method and model.
        if spec.params.get("summary_scope", "corpus") != "document":
            return {}
        method = spec.params.get("summary", "heuristic")
        llm = clients.get(spec.type)
        return parts.document_summaries(method, llm.with_own_usage() if llm is not None and method == "llm" else None)

    def document_profiles(spec: ComponentSpec) -> Any:
        # Written once per corpus and method like the summary; in llm mode one call per document,
        # through a client of its own so no question's stage carries it.
        by_model = spec.params.get("mode") == "llm" and spec.params.get("documents", "mode") == "mode"
        method: ProfileMethod = "llm" if by_model else "heuristic"
        llm = clients.get(spec.type)
        design = {name: spec.params[name] for name in ("taxonomy", "sample", "sample_chars") if name in spec.params}
        return parts.document_profiles(method, llm.with_own_usage() if llm is not None and method == "llm" else None,
                                       **design)

    wired = wire_stages([*point.active_judges(), *([point.generator] if point.generator else [])], judge,
                        parts.switchable or parts.base,
                        {"index": lambda spec: parts.index, "embedder": lambda spec: parts.embedder,
                         "summary": summary, "document_summaries": document_summaries,
                         "document_profiles": document_profiles})
    for stage in wired.stages:
        # The document profiles on chunks (the profile judge's on_chunks): every retriever that
        # searches the index adds them to the chunks it returns.
        chunk_metadata = getattr(stage, "chunk_metadata", None)
        if chunk_metadata is not None and (by_doc := chunk_metadata()):
            for searcher in parts.searchers:
                searcher.use_document_metadata(by_doc)
    return Pipeline(
        retriever=wired.retriever,
        base_retriever=parts.switchable or parts.base,
        retrieve_stage=wired.retrieve_stage,
        stages=tuple(wired.stages),
        switchable=parts.switchable,
        web=web_providers.build(point.web) if point.web is not None else None,
        web_results=point.top_k,
        searchers=parts.searchers,
        retrieval_cache=parts.retrieval_cache,
        clients=tuple({id(c): c for c in clients.values()}.values()),
    )


def switchable_retriever(point: GridPoint, base: Any, index: ChunkIndex, embedder: Any) -> SwitchableRetriever:
    """The grid's retriever plus the other strategies over the same index (``GridPoint.searchers``),
    for the strategy judge and the quality gate's switch map to choose from."""
    others = {spec.type: retriever_registry.build(spec, index=index, embedder=embedder)
              for spec in point.searchers()[1:]}
    return SwitchableRetriever({point.retriever.type: base, **others}, default=point.retriever.type)


def question_evaluator(plan: Plan, run: RunStep, components: SharedComponents) -> QuestionEvaluator | None:
    """The run's generation metrics per question (None when the run has no evaluation)."""
    params = run.point.evaluation
    if params is None:
        return None
    llm = components.llm_client(run.llms[EVALUATION]) if EVALUATION in run.llms else None
    # The bundled MiniLM embeds for answer relevancy and embedding groundedness, whatever
    # embedder the run retrieves with, so the metric means the same across runs.
    return QuestionEvaluator(params, llm, components.reference_embed_model(), plan.corpus.by_id())

