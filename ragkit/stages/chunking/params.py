"""The Chunking Judge's parameters and declarations, without LlamaIndex.

The judge reads LlamaIndex documents; validating a config and planning a grid read only its
``Params``, modes and role, so these live here, in an *info* class ``ChunkingJudge`` subclasses,
readable through ``judges.info("chunking")`` without importing ``ragkit.stages.chunking.stage``.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from ragkit.chunkers.registry import judge_choosable_chunkers
from ragkit.registry import ComponentSpec
from ragkit.stages.base import StageInfo, StageParams
from ragkit.stages.chunking.sizes import SizeRule, check_suffixes


class ChunkingJudgeParams(StageParams):
    default: ComponentSpec = Field(
        default=ComponentSpec(type="recursive"),
        description="The chunker used when the judge is off or its choice is unusable.",
    )
    allow_semantic: bool = Field(default=False, description="Let the judge choose the semantic chunker (embeds).")
    sample_chars: int = Field(
        default=5000, ge=300, le=50_000,
        description="Characters of the document shown to the model: its beginning, middle and end.",
    )
    short_doc_chars: int = Field(
        default=2000, ge=0, le=100_000, description="heuristic: documents shorter than this stay one chunk."
    )
    min_markdown_headers: int = Field(
        default=2, ge=1, le=100, description="heuristic: markdown header lines that make a document markdown."
    )
    max_tokens: int = Field(default=120, ge=16, le=2048, description="Most tokens in one reply.")
    strategies: list[str] | None = Field(
        default=None, min_length=1,
        description="The chunkers the judge may choose (an allowlist; listing semantic allows it). "
        "None: every registered chunker that calls no LLM (semantic only with allow_semantic).",
    )
    show_file_name: bool = Field(default=False, description="Show the document's file name in the prompt.")
    size_rules: dict[str, SizeRule] = Field(
        default_factory=dict,
        description="Per file suffix ('.txt'), factors on the chosen chunk_size and chunk_overlap, "
        "e.g. {'.txt': {size: 3, overlap: 2}}; the fallback chunker is never scaled.",
    )

    fill_size: int | None = Field(
        default=None, ge=16, le=100_000,
        description="The chunk_size given to a chosen chunker when the reply leaves it out (the design: 500); "
        "none: the chunker's own default.")
    fill_overlap: int | None = Field(
        default=None, ge=0, le=50_000,
        description="The chunk_overlap given when the reply leaves it out (the design: 50); none: the chunker's own.")
    token_divisor: int = Field(
        default=1, ge=1, le=8,
        description="The token chunker's chunk_size and chunk_overlap are the chosen (character) sizes divided by "
        "this (the design: 4, about 4 characters a token); 1: taken as tokens.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {
        "strategies", "show_file_name", "size_rules", "fill_size", "fill_overlap", "token_divisor"}

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        choosable = judge_choosable_chunkers()
        unknown = [name for name in value if name not in choosable]
        if unknown:
            raise ValueError(f"strategies {unknown} are not chunkers the judge can choose. "
                             f"Valid chunkers: {', '.join(choosable)}")
        return list(dict.fromkeys(value))

    @field_validator("size_rules")
    @classmethod
    def _suffixes(cls, value: dict[str, SizeRule]) -> dict[str, SizeRule]:
        return check_suffixes(value)


class ChunkingJudgeInfo(StageInfo):
    """What ``ChunkingJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "chunking"
    role: ClassVar[str] = "chunking"
    Params: ClassVar[type[ChunkingJudgeParams]] = ChunkingJudgeParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")
