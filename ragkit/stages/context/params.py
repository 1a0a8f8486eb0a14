"""Each built-in context stage's parameters and declarations, without LlamaIndex.

The rerank judge is a LlamaIndex node postprocessor, and every context stage reads and writes
chunks; validating a config and planning a grid read only a stage's ``Params``, modes, role and
plan-time rules (how many chunks it passes on), so these live here, in an *info* class the stage
class subclasses, readable through ``judges.info(name)`` without importing the stage.
"""

from __future__ import annotations

from typing import ClassVar, Literal, cast

from pydantic import Field, model_validator

from ragkit.stages.base import StageInfo, StageMode, StageParams


class RerankJudgeParams(StageParams):
    top_n: int = Field(default=5, ge=1, le=100, description="Chunks kept after reranking.")
    batch_size: int = Field(default=8, ge=1, le=50, description="Chunks scored in one LLM call.")
    chunk_chars: int = Field(
        default=300, ge=40, le=4000, description="Characters of each chunk shown to the model (small context)."
    )
    max_tokens: int = Field(default=96, ge=8, le=2048, description="Most tokens in one reply.")
    model_path: str | None = Field(
        default=None, description="Local folder of a sentence-transformers CrossEncoder (mode cross_encoder, "
        "or the first stage of a two-stage rerank); nothing is downloaded.",
    )
    prefilter_n: int | None = Field(
        default=None, ge=1, le=200,
        description="llm: first keep this many candidates by the prefilter, then the LLM scores those (two stages).",
    )
    prefilter: Literal["cross_encoder", "bm25"] = Field(
        default="cross_encoder", description="The first stage of a two-stage rerank: the cross-encoder at "
        "model_path, or BM25 over the candidates (no model needed).",
    )
    show_source: bool = Field(
        default=False, description="llm: show each chunk's title and section (and summary) in the prompt.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "model_path", "prefilter_n", "prefilter", "show_source"}

    @model_validator(mode="after")
    def _model_when_needed(self) -> RerankJudgeParams:
        needs_model = self.mode == "cross_encoder" or (
            self.mode == "llm" and self.prefilter_n is not None and self.prefilter == "cross_encoder")
        if needs_model and not self.model_path:
            raise ValueError("model_path is required for a cross-encoder (mode cross_encoder, or prefilter_n with "
                             "prefilter cross_encoder): a local CrossEncoder folder, or set prefilter: bm25")
        return self


class EnrichmentParams(StageParams):
    mode: StageMode = Field(default="heuristic", description="off: the reranked chunks as they are; heuristic: "
                            "add neighbours and same-section chunks.")
    window: int = Field(default=1, ge=0, le=5, description="Chunks before and after each hit added (0: none).")
    max_related: int = Field(default=3, ge=0, le=20,
                             description="Most other chunks of the hit's section added (0: none).")
    related_min_score: float = Field(
        default=0.7, ge=0.0, le=1.0,
        description="A same-section chunk is added when its cosine similarity to the query exceeds this.",
    )
    parent_summary: bool = Field(
        default=False,
        description="Show each chunk with its document's summary line (doc_summary from a chunker with "
        "summaries on, else the document's description).",
    )

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {"parent_summary"}


class CompressionParams(StageParams):
    min_overlap: float = Field(
        default=0.3, ge=0.0, le=1.0,
        description="heuristic: a sentence is kept when it holds at least this share of the question's content "
        "words (and at least one of them).",
    )
    max_tokens: int = Field(default=64, ge=8, le=1024, description="llm: most tokens in one reply.")


class RerankJudgeInfo(StageInfo):
    """What ``RerankJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "rerank"
    role: ClassVar[str] = "context"
    order: ClassVar[int] = 10
    # It reorders and cuts the list: a quality gate with ``position: after_rerank`` judges its output.
    reranks: ClassVar[bool] = True
    Params: ClassVar[type[RerankJudgeParams]] = RerankJudgeParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm", "cross_encoder")

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        return min(depth, cast(RerankJudgeParams, params).top_n)  # final_depth checked it is cls.Params


class EnrichmentJudgeInfo(StageInfo):
    """What ``EnrichmentJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "enrichment"
    role: ClassVar[str] = "context"
    order: ClassVar[int] = 20
    needs: ClassVar[tuple[str, ...]] = ("index", "embedder")
    Params: ClassVar[type[EnrichmentParams]] = EnrichmentParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic")

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        own = cast(EnrichmentParams, params)  # final_depth checked it is cls.Params
        return depth * (1 + 2 * own.window + own.max_related)


class CompressionJudgeInfo(StageInfo):
    """What ``CompressionJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "compression"
    role: ClassVar[str] = "context"
    order: ClassVar[int] = 30  # after rerank (10) and enrichment (20): it shapes what the generator reads
    Params: ClassVar[type[CompressionParams]] = CompressionParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")
