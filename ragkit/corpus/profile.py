"""Document profiles: each document's type, technical density and domain tags, and the corpus'
profile made of them, written once per corpus and method and read back after.

The profile judge (``ragkit.stages.query.profile``) hands the corpus profile, beside the query's
intent and complexity, to the strategy judge. Two methods, per document:

- ``heuristic``: the type by rule (``document_type``: the file type, then academic markers, then
  markdown-like structure); technical density = identifier-like tokens (``ragkit.text.CODE_LIKE``:
  "IL-6", "ACE2", "top_k") per whitespace-separated token, times ``DENSITY_SCALE`` (4) and capped
  at 1, so that one identifier in four tokens (source code, a configuration file) is the top of
  the 0-1 scale the llm method answers on (a virology paper: about 0.3-0.5; prose: under 0.1);
  domain tags = the
  document's ``TAGS_PER_DOCUMENT`` heaviest words, weighted as the corpus summary weighs them
  (``log(1 + count) * log(1 + N / df)``, so words every document uses rank low).
- ``llm``: the model reads the title and the opening ``PROFILE_CHARS`` characters and answers
  ``{type, technical_density, domain_tags}``; a reply that cannot be used keeps that document's
  heuristic profile, marked invalid with the reason.

Profiles are computed per document when a run's pipeline is assembled, not when chunks are made: a
profile then enters no chunk set or index key, and every chunker and embedder of a corpus shares
it. With the profile judge's ``on_chunks`` (the agentic design's profile on every chunk) each chunk
a run retrieves carries its document's profile in its metadata (``CHUNK_FIELDS``: ``doc_type``,
``technical_density``, ``domain_tags``), added by the run's retrievers to the chunks they return
(``ragkit.retrievers.base.Retriever.use_document_metadata``), so the stages after retrieval read it
while the stored chunk sets, indexes and caches stay as they are. The file is keyed by corpus id,
method and model (``DATA/profiles/``, written atomically); in llm mode each document is one call
through the LLM cache, so a new corpus version asks again only for the documents it adds. A failed
call (``LLMError``) is not written to the file: the next run asks again.

``taxonomy: design`` profiles with the agentic design's 29 types and ``sample: stratified`` shows
the model the design's stratified sample of ``sample_chars`` characters instead of the opening
(``ragkit.corpus.profile_design``); either makes a file of its own.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from llama_index.core.schema import Document
from pydantic import BaseModel, Field

from ragkit.corpus.model import Corpus
from ragkit.corpus.profile_design import DESIGN_DOCUMENT_TYPES, FROM_BASIC, DesignDocumentType, stratified_sample
from ragkit.errors import LLMError
from ragkit.hashing import content_key
from ragkit.llms.calls import LLMClient
from ragkit.storage.atomic import write_json_atomic
from ragkit.text import CODE_LIKE, content_words

ProfileMethod = Literal["heuristic", "llm"]
Taxonomy = Literal["basic", "design"]
SampleKind = Literal["opening", "stratified"]
DocumentType = Literal["academic", "code", "table", "documentation", "general"]
DOCUMENT_TYPES: tuple[DocumentType, ...] = ("academic", "code", "table", "documentation", "general")

# Bump when a method's output changes: files written before are then written again.
PROFILE_FORMAT = 1
# What a chunk carries of its document's profile when the profile judge's ``on_chunks`` is on.
CHUNK_FIELDS = ("doc_type", "technical_density", "domain_tags")
STAGE = "corpus:profile"
PROFILE_CHARS = 800  # llm: characters of each document's opening shown
PROFILE_MAX_TOKENS = 96
DENSITY_SCALE = 4
TAGS_PER_DOCUMENT = 3
CORPUS_TAGS = 5

CODE_FILE_TYPES = frozenset("py js ts java c cpp h go rs rb sh ipynb".split())
TABLE_FILE_TYPES = frozenset("csv tsv xlsx xls".split())
DOCUMENTATION_FILE_TYPES = frozenset("md markdown rst yaml yml html htm".split())
# Words a research paper carries; two of them make a document academic.
ACADEMIC_MARKERS = re.compile(r"\b(?:abstract|doi|et al\.|references|methods|conclusions?|pmc\d*|arxiv)\b",
                              re.IGNORECASE)
MARKDOWN_HEADING = re.compile(r"^#{1,6} \S", re.MULTILINE)


@dataclass(frozen=True)
class DocumentProfile:
    doc_id: str
    type: str  # one of DOCUMENT_TYPES, or of DESIGN_DOCUMENT_TYPES with taxonomy design
    technical_density: float  # 0-1
    domain_tags: tuple[str, ...]
    valid: bool = True  # False: the llm reply was unusable and this is the heuristic profile
    error: str | None = None


@dataclass(frozen=True)
class CorpusProfile:
    """Every document's profile, and what the strategy judge reads of them together."""

    corpus_id: str
    method: ProfileMethod
    model: str | None
    documents: tuple[DocumentProfile, ...] = field(default_factory=tuple)

    def types(self) -> dict[str, int]:
        """Documents per type, most common first (ties in the order of ``DOCUMENT_TYPES``)."""
        counts = Counter(profile.type for profile in self.documents)
        order = (*DOCUMENT_TYPES, *DESIGN_DOCUMENT_TYPES)
        return {kind: counts[kind] for kind in sorted(counts, key=lambda k: (-counts[k], order.index(k)))}

    def dominant_type(self) -> str | None:
        return next(iter(self.types()), None)

    def technical_density(self) -> float:
        """The documents' mean density (each document counts once, whatever its length)."""
        if not self.documents:
            return 0.0
        return round(sum(profile.technical_density for profile in self.documents) / len(self.documents), 4)

    def domain_tags(self) -> list[str]:
        """The ``CORPUS_TAGS`` tags most documents carry (ties alphabetical)."""
        counts = Counter(tag for profile in self.documents for tag in profile.domain_tags)
        return [tag for tag, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:CORPUS_TAGS]]

    def invalid(self) -> int:
        return sum(not profile.valid for profile in self.documents)

    def chunk_metadata(self) -> dict[str, dict[str, Any]]:
        """doc id -> what each chunk of the document carries of its profile (``CHUNK_FIELDS``)."""
        return {profile.doc_id: {"doc_type": profile.type, "technical_density": profile.technical_density,
                                 "domain_tags": list(profile.domain_tags)} for profile in self.documents}


class DocumentProfileReply(BaseModel):
    type: DocumentType = Field(description="academic, code, table, documentation or general.")
    technical_density: float = Field(ge=0.0, le=1.0, description="0: plain prose; 1: dense with codes and terms.")
    domain_tags: list[str] = Field(default_factory=list, max_length=5, description="Up to 5 topic words.")


class DesignProfileReply(BaseModel):
    type: DesignDocumentType = Field(description="The most specific of the design's 29 document types.")
    technical_density: float = Field(ge=0.0, le=1.0, description="0: plain prose; 1: dense with codes and terms.")
    domain_tags: list[str] = Field(default_factory=list, max_length=5, description="Up to 5 topic words.")


SYSTEM = "You profile a document for a search system. Reply with one JSON object only."

EXAMPLE = (
    "Example:\nTitle: Setting up the API client\n"
    "Opening: Install with pip install acme-client, then call Client(api_key=...).\n"
    '{"type": "documentation", "technical_density": 0.7, "domain_tags": ["api", "client", "install"]}'
)


def corpus_profile(corpus: Corpus, cache_dir: Path, method: ProfileMethod, llm: LLMClient | None = None,
                   taxonomy: Taxonomy = "basic", sample: SampleKind = "opening",
                   sample_chars: int = PROFILE_CHARS) -> CorpusProfile:
    """The corpus' profile: read from ``cache_dir`` when written before, else written now."""
    if method not in ("heuristic", "llm"):
        raise ValueError(f"document profile method must be 'heuristic' or 'llm', got {method!r}")
    if method == "llm" and llm is None:
        raise ValueError("document profile method 'llm' needs an LLM client")
    model = f"{llm.backend.name}:{llm.backend.model_name}" if method == "llm" and llm is not None else None
    path = profile_path(corpus.corpus_id, cache_dir, method, model,
                        profile_variant(method, taxonomy, sample, sample_chars))
    cached = _read(path, corpus.corpus_id, method, model)
    if cached is not None:
        return cached
    rules = heuristic_profiles(list(corpus.documents))
    if taxonomy == "design":
        rules = [DocumentProfile(**{**asdict(rule), "type": FROM_BASIC[rule.type]}) for rule in rules]
    profiles, cacheable = rules, True
    if method == "llm" and llm is not None:
        profiles = []
        for document, fallback in zip(corpus.documents, rules):
            answer, answered = llm_profile(document, fallback, llm, taxonomy, sample, sample_chars)
            profiles.append(answer)
            cacheable = cacheable and answered
    if cacheable:
        write_json_atomic(path, {"format": PROFILE_FORMAT, "corpus_id": corpus.corpus_id, "method": method,
                                 "model": model, "documents": [asdict(item) for item in profiles]})
    return CorpusProfile(corpus.corpus_id, method, model, tuple(profiles))


def profile_variant(method: ProfileMethod, taxonomy: Taxonomy = "basic", sample: SampleKind = "opening",
                    sample_chars: int = PROFILE_CHARS) -> tuple[object, ...] | None:
    """What of the design's options a profile file is keyed by: None for the basic profile (its
    file name stays), the sample only where the model reads one (llm)."""
    if method != "llm":
        return None if taxonomy == "basic" else (taxonomy,)
    if (taxonomy, sample, sample_chars) == ("basic", "opening", PROFILE_CHARS):
        return None
    return taxonomy, sample, sample_chars


def profile_path(corpus_id: str, cache_dir: Path, method: ProfileMethod, model: str | None,
                 variant: tuple[object, ...] | None = None) -> Path:
    """The file a corpus' profiles are written to, per method and model (``backend:model``; None by
    rule) and the design's options (``variant``; None for the basic profile)."""
    key = content_key(PROFILE_FORMAT, model, length=8) if variant is None else \
        content_key(PROFILE_FORMAT, model, variant, length=8)
    return cache_dir / f"{corpus_id}-{method}-{key}.json"


def _read(path: Path, corpus_id: str, method: ProfileMethod, model: str | None) -> CorpusProfile | None:
    """The cached profile, or None when missing or unreadable (then it is written again)."""
    try:
        entry: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if (entry.get("format"), entry.get("corpus_id"), entry.get("method"), entry.get("model")) != (
                PROFILE_FORMAT, corpus_id, method, model):
            return None
        documents = tuple(DocumentProfile(**{**item, "domain_tags": tuple(item["domain_tags"])})
                          for item in entry["documents"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return CorpusProfile(corpus_id, method, model, documents)


def document_type(text: str, metadata: dict[str, Any]) -> DocumentType:
    """The first rule that holds: a code or table file; two academic markers; a markdown-like file
    or three markdown headings; otherwise general."""
    file_type = str(metadata.get("file_type") or "").lower()
    if file_type in CODE_FILE_TYPES or metadata.get("language"):
        return "code"
    if file_type in TABLE_FILE_TYPES:
        return "table"
    if len({marker.lower() for marker in ACADEMIC_MARKERS.findall(text)}) >= 2:
        return "academic"
    if file_type in DOCUMENTATION_FILE_TYPES or len(MARKDOWN_HEADING.findall(text)) >= 3:
        return "documentation"
    return "general"


def technical_density(text: str) -> float:
    """Identifier-like tokens per whitespace-separated token, times DENSITY_SCALE, capped at 1
    (0 for an empty text)."""
    tokens = len(text.split())
    return round(min(1.0, DENSITY_SCALE * len(CODE_LIKE.findall(text)) / tokens), 4) if tokens else 0.0


def domain_tags(texts: list[str], count: int = TAGS_PER_DOCUMENT) -> list[tuple[str, ...]]:
    """Each text's ``count`` heaviest content words against the others (ties alphabetical)."""
    per_document = [Counter(content_words(text)) for text in texts]
    document_frequency = Counter(word for counts in per_document for word in counts)
    total = len(texts)
    tags = []
    for counts in per_document:
        weight = {word: math.log1p(seen) * math.log1p(total / document_frequency[word])
                  for word, seen in counts.items()}
        tags.append(tuple(word for word, _ in sorted(weight.items(), key=lambda item: (-item[1], item[0]))[:count]))
    return tags


def heuristic_profiles(documents: list[Document]) -> list[DocumentProfile]:
    tags = domain_tags([document.text for document in documents])
    return [DocumentProfile(document.id_, document_type(document.text, document.metadata),
                            technical_density(document.text), document_tags)
            for document, document_tags in zip(documents, tags)]


def build_prompt(document: Document, taxonomy: Taxonomy = "basic", sample: SampleKind = "opening",
                 sample_chars: int = PROFILE_CHARS) -> str:
    title = " ".join(str(document.metadata.get("title") or document.id_).split())
    if sample == "stratified":
        shown, label = stratified_sample(document.text, sample_chars), "Sample"
    else:
        shown, label = " ".join(document.text.split())[:sample_chars], "Opening"
    types = DESIGN_DOCUMENT_TYPES if taxonomy == "design" else DOCUMENT_TYPES
    return (f"{EXAMPLE}\n\nTitle: {title}\n{label}: {shown}\n"
            f"Type: one of {', '.join(types)}. Reply as JSON with type, technical_density "
            "(0 to 1) and domain_tags (up to 5 topic words).")


def llm_profile(document: Document, fallback: DocumentProfile, llm: LLMClient, taxonomy: Taxonomy = "basic",
                sample: SampleKind = "opening", sample_chars: int = PROFILE_CHARS) -> tuple[DocumentProfile, bool]:
    """The model's profile of ``document``, or ``fallback`` marked invalid; the flag is False after
    a failed call (not a reply to remember)."""
    schema: type[DocumentProfileReply | DesignProfileReply] = \
        DesignProfileReply if taxonomy == "design" else DocumentProfileReply
    try:
        result = llm.call(build_prompt(document, taxonomy, sample, sample_chars), stage=STAGE, schema=schema,
                          system=SYSTEM, max_tokens=PROFILE_MAX_TOKENS)
    except LLMError as error:
        return DocumentProfile(**{**asdict(fallback), "valid": False, "error": str(error)}), False
    reply = result.parsed
    if reply is None:
        return DocumentProfile(**{**asdict(fallback), "valid": False, "error": result.parse_error}), True
    tags = tuple(dict.fromkeys(" ".join(tag.lower().split()) for tag in reply.domain_tags if tag.strip()))
    return DocumentProfile(document.id_, reply.type, round(reply.technical_density, 4), tags), True
