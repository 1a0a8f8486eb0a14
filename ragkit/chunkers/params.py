"""Each built-in chunker's parameters and declarations, without LlamaIndex.

Validating a config and planning a grid read a chunker's ``Params``, ``version`` and flags
(``uses_llm``, ``judge_choosable``); the chunker classes subclass LlamaIndex's NodeParser, whose
import costs more than a finished grid's whole re-run. So each built-in's declarations live here,
in an *info* class its chunker class subclasses (``TokenChunker(TokenChunkerInfo, ...)``): written
once, readable through ``chunkers.info(name)`` without importing the chunker (``ragkit.registry``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ragkit.registry import Component, ComponentParams

DEFAULT_SEPARATORS = ("\n\n", "\n", ". ", " ", "")


class ChunkerParams(ComponentParams):
    contextualize: bool = Field(
        default=False,
        description="Prefix each chunk's embedded text with the document title and section breadcrumb "
        "(and its summary, with summaries on).",
    )
    summaries: bool = Field(
        default=False,
        description="Ask the LLM (the chunking role) for a summary of each chunk, at most 200 characters, "
        "cached; shown by contextualize and the rerank prompt's show_source. One call per chunk.",
    )

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {"summaries"}


class WindowParams(ChunkerParams):
    """Params of chunkers cut into windows: subclasses set the unit, defaults and bounds."""

    chunk_size: int
    chunk_overlap: int

    @model_validator(mode="after")
    def _overlap_below_size(self) -> WindowParams:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


class TokenWindowParams(WindowParams):
    """Token-counted sizes, shared by the token and sentence chunkers."""

    chunk_size: int = Field(default=256, ge=16, le=8192, description="Maximum chunk length in tokens (cl100k_base).")
    chunk_overlap: int = Field(default=32, ge=0, le=4096, description="Tokens repeated between consecutive chunks.")


class SentenceParams(TokenWindowParams):
    chunk_size: int = Field(default=512, ge=16, le=8192, description="Maximum chunk length in tokens (cl100k_base).")
    chunk_overlap: int = Field(default=64, ge=0, le=4096, description="Tokens repeated between consecutive chunks.")


class RecursiveParams(WindowParams):
    chunk_size: int = Field(default=1000, ge=50, le=100_000, description="Maximum chunk length in characters.")
    chunk_overlap: int = Field(
        default=200, ge=0, le=50_000, description="Characters repeated between consecutive chunks (at most)."
    )
    separators: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SEPARATORS),
        min_length=1,
        max_length=20,
        description="Separators tried in order; a piece still too long is split with the next one.",
    )


class FileTypeRule(ComponentParams):
    """How the recursive splitter cuts one file type: factors on its chunk_size and chunk_overlap,
    and the separators tried for that type (none: the splitter's own)."""

    size: float = Field(default=1.0, gt=0, le=20, description="Factor on chunk_size.")
    overlap: float = Field(default=1.0, ge=0, le=20, description="Factor on chunk_overlap.")
    separators: list[str] | None = Field(
        default=None, min_length=1, max_length=20, description="Separators for this type, tried in order.")


class RecursiveSplitterParams(RecursiveParams):
    file_types: dict[str, FileTypeRule] = Field(
        default_factory=dict,
        description="Per file suffix ('.txt', lower case): size and overlap factors and separators, applied to "
        "each document of that type, e.g. {'.txt': {size: 3, overlap: 2}, '.csv': {size: 2, separators: ['\\n']}}.",
    )

    added_fields: ClassVar[frozenset[str]] = RecursiveParams.added_fields | {"file_types"}

    @model_validator(mode="after")
    def _suffixes_and_sizes(self) -> RecursiveSplitterParams:
        bad = [key for key in self.file_types if not key.startswith(".") or key != key.lower() or len(key) < 2]
        if bad:
            raise ValueError(f"file_types keys must be lower-case file suffixes like '.txt', got {bad}")
        for suffix, rule in self.file_types.items():
            size, overlap = self.sizes(rule)
            if overlap >= size:
                raise ValueError(f"file_types {suffix}: chunk_overlap x {rule.overlap} ({overlap}) must be smaller "
                                 f"than chunk_size x {rule.size} ({size})")
        return self

    def sizes(self, rule: FileTypeRule) -> tuple[int, int]:
        """(chunk_size, chunk_overlap) under ``rule``, rounded to whole characters."""
        return round(self.chunk_size * rule.size), round(self.chunk_overlap * rule.overlap)


class SemanticParams(ChunkerParams):
    buffer_size: int = Field(
        default=1, ge=1, le=10, description="Sentences on each side combined with a sentence before embedding it."
    )
    breakpoint_percentile_threshold: int = Field(
        default=95,
        ge=1,
        le=99,
        description="Cut where the distance between neighbours exceeds this percentile; lower gives more chunks.",
    )


class CodeParams(ChunkerParams):
    max_chars: int = Field(
        default=4000, ge=200, le=100_000, description="Longer definitions are split (classes by method)."
    )
    fallback_chunk_size: int = Field(
        default=1000, ge=50, le=100_000, description="Chunk size in characters when the text is not Python."
    )
    chunk_overlap: int = Field(
        default=200,
        ge=0,
        le=50_000,
        description="Characters repeated between pieces of text split recursively (not Python, or too long).",
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> CodeParams:
        if self.chunk_overlap >= min(self.fallback_chunk_size, self.max_chars):
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than "
                f"fallback_chunk_size ({self.fallback_chunk_size}) and max_chars ({self.max_chars})"
            )
        return self


class LLMSemanticParams(ChunkerParams):
    window_chars: int = Field(default=10_000, ge=1000, le=10_000,
                              description="Characters of the document shown to the model in one call.")
    target_chars: int = Field(default=1000, ge=100, le=10_000, description="The chunk size asked of the model.")
    min_chunk_chars: int = Field(default=200, ge=0, le=10_000,
                                 description="A boundary closer than this to the previous one is ignored.")
    max_chunk_chars: int = Field(default=3000, ge=200, le=50_000,
                                 description="A longer chunk is split recursively inside its boundaries.")
    fallback_chunk_size: int = Field(default=1000, ge=50, le=50_000,
                                     description="Recursive chunk size for a window whose reply is unusable.")
    fallback_overlap: int = Field(default=200, ge=0, le=10_000, description="Recursive overlap of the fallback.")
    quote_words: int = Field(default=6, ge=3, le=20, description="Words of each chunk's opening the model copies.")
    max_tokens: int = Field(default=400, ge=16, le=4096, description="Most tokens in one reply.")

    @model_validator(mode="after")
    def _sizes_in_order(self) -> LLMSemanticParams:
        if self.fallback_overlap >= self.fallback_chunk_size:
            raise ValueError(f"fallback_overlap ({self.fallback_overlap}) must be smaller than "
                             f"fallback_chunk_size ({self.fallback_chunk_size})")
        if self.min_chunk_chars >= self.max_chunk_chars:
            raise ValueError(f"min_chunk_chars ({self.min_chunk_chars}) must be smaller than "
                             f"max_chunk_chars ({self.max_chunk_chars})")
        return self


class ByFileTypeParams(ChunkerParams):
    target_words: int = Field(
        default=512, ge=2, le=20_000,
        description="markdown: a section longer than max_words is cut into windows of this many words.",
    )
    max_words: int = Field(
        default=1024, ge=2, le=50_000, description="markdown: the most words of one chunk of whole sections.",
    )
    min_words: int = Field(
        default=100, ge=0, le=20_000,
        description="markdown: a section with fewer words is merged with the sections after it (within max_words).",
    )
    window_words: int = Field(
        default=512, ge=2, le=20_000, description="Other files (and Python that does not parse): words per window.",
    )
    window_overlap: int = Field(
        default=50, ge=0, le=10_000,
        description="Words repeated between consecutive word windows (other files and long markdown sections).",
    )
    code_max_chars: int = Field(
        default=4000, ge=400, le=100_000,
        description="Python: a longer definition is split (a class by method), as the code chunker does.",
    )
    max_related_ids: int = Field(
        default=6, ge=0, le=50,
        description="related_chunk_ids kept per chunk: its neighbours, then its section's other chunks (0: none).",
    )
    document_fields: Literal["loader", "design"] = Field(
        default="loader",
        description="The title, author and tags each chunk carries (and contextualize embeds): the corpus "
        "loader's, or design (the context-enhancement design's: a Python module's docstring line as its title, "
        "else the file stem title-cased; an author line's name; Python files tagged python and code).",
    )

    added_fields: ClassVar[frozenset[str]] = ChunkerParams.added_fields | {"document_fields"}

    @model_validator(mode="after")
    def _consistent_sizes(self) -> ByFileTypeParams:
        if not self.min_words <= self.target_words <= self.max_words:
            raise ValueError(f"need min_words ({self.min_words}) <= target_words ({self.target_words}) "
                             f"<= max_words ({self.max_words})")
        if self.window_overlap >= min(self.window_words, self.target_words):
            raise ValueError(f"window_overlap ({self.window_overlap}) must be smaller than window_words "
                             f"({self.window_words}) and target_words ({self.target_words})")
        return self


class ChunkerInfo(Component):
    """What every chunker declares; ``ragkit.chunkers.base.Chunker`` subclasses it."""

    kind: ClassVar[str] = "chunker"
    Params: ClassVar[type[ChunkerParams]] = ChunkerParams
    # True for a chunker class that always calls an LLM (the plan then gives it the chunking role).
    uses_llm: ClassVar[bool] = False
    # False for a chunker that splits by each document's own type: the Chunking Judge, which picks
    # a chunker per document, does not offer it (``judge_choosable_chunkers``).
    judge_choosable: ClassVar[bool] = True


class TokenChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "token"
    Params: ClassVar[type[TokenWindowParams]] = TokenWindowParams


class SentenceChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "sentence"
    Params: ClassVar[type[SentenceParams]] = SentenceParams


class RecursiveChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "recursive"
    Params: ClassVar[type[RecursiveSplitterParams]] = RecursiveSplitterParams


class MarkdownChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "markdown"
    Params: ClassVar[type[RecursiveParams]] = RecursiveParams


class SemanticChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "semantic"
    Params: ClassVar[type[SemanticParams]] = SemanticParams


class CodeChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "code"
    Params: ClassVar[type[CodeParams]] = CodeParams


class LLMSemanticChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "llm_semantic"
    Params: ClassVar[type[LLMSemanticParams]] = LLMSemanticParams
    uses_llm: ClassVar[bool] = True


class DocumentChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "document"


class ByFileTypeChunkerInfo(ChunkerInfo):
    name: ClassVar[str] = "by_file_type"
    Params: ClassVar[type[ByFileTypeParams]] = ByFileTypeParams
    judge_choosable: ClassVar[bool] = False
