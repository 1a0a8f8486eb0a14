"""Chunking Judge: pick a registered chunker and its parameters for one document.

``llm`` mode shows the model a sample of the document (its beginning, middle and end, about
``sample_chars`` in all) and the registered chunkers, and asks for ``{chunker, params,
justification}``. The choice is validated through ``chunkers.resolve``: an unknown chunker,
a disallowed one (semantic, unless ``allow_semantic``) or bad params fall back to the
configured ``default`` spec, recorded as invalid with the reason. ``heuristic`` mode profiles
the text instead: a short document is one chunk (``document``), Python source goes to
``code``, text with markdown headers to ``markdown``, anything else to ``recursive``.

Options a design may set (each off by default, and then without effect): ``strategies``, the
chunkers it may choose (an allowlist: a reply naming another falls back); ``show_file_name``,
the document's file name in the prompt; ``size_rules``, the chosen size scaled per file type
(``ragkit.stages.chunking.sizes``).

Decisions are cached by the LLM cache (the prompt holds the sample, so an identical
document sends nothing to the model twice); ``decision_key`` names a decision without making
it, so a plan can put it into the chunk set's content key before anything runs.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import PurePosixPath
from typing import Any

from llama_index.core.schema import Document
from pydantic import BaseModel, Field

from ragkit.chunkers.registry import chunkers
from ragkit.chunkers.registry import judge_choosable_chunkers as judge_choosable_chunkers  # re-exported: its old home
from ragkit.errors import ConfigError, LLMError
from ragkit.hashing import content_key, text_sha256
from ragkit.registry import ComponentSpec
from ragkit.stages.base import Judgement, Stage
from ragkit.stages.chunking.params import ChunkingJudgeInfo, ChunkingJudgeParams
from ragkit.stages.chunking.sizes import file_suffix, scaled

SEMANTIC = "semantic"
_PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
_MARKDOWN_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_FENCED_BLOCK = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)

# One line per built-in chunker for the prompt; a plugin is shown with its parameter names.
CHUNKER_HINTS = {
    "recursive": "plain prose; params chunk_size, chunk_overlap (characters)",
    "markdown": "text with # headers, one chunk per section; params chunk_size, chunk_overlap",
    "code": "Python source, one chunk per function or class; params max_chars",
    "document": "one chunk for the whole document (short documents)",
    "sentence": "sentence-aligned windows; params chunk_size, chunk_overlap (tokens)",
    "token": "fixed token windows; params chunk_size, chunk_overlap (tokens)",
    "semantic": "splits where the topic changes (uses the embedder)",
}


class ChunkingReply(BaseModel):
    chunker: str = Field(description="Name of one of the listed chunkers.")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of that chunker.")
    justification: str = Field(default="", description="Why this chunker suits the document.")


SYSTEM = "You choose how to split a document into chunks for search. Reply with one JSON object only."

EXAMPLE = (
    "Example:\n"
    "Document:\n# Install\nRun pip install tool.\n## Usage\nCall tool --help.\n"
    '{"chunker": "markdown", "params": {"chunk_size": 800, "chunk_overlap": 100}, '
    '"justification": "The text is split by markdown headers."}'
)


def document_sample(text: str, sample_chars: int) -> str:
    """The whole text if it fits, else its beginning, middle and end (a third of the budget each)."""
    if len(text) <= sample_chars:
        return text
    part = sample_chars // 3
    middle = (len(text) - part) // 2
    return "\n[...]\n".join((text[:part], text[middle : middle + part], text[-part:]))


def build_prompt(sample: str, names: list[str], file_name: str | None = None) -> str:
    """``file_name``: shown above the document when given (the file type is a strong hint)."""
    choices = "\n".join(f"- {name}: {CHUNKER_HINTS.get(name) or _param_hint(name)}" for name in names)
    shown = f"File name: {file_name}\n" if file_name else ""
    return (
        f"{EXAMPLE}\n\nChunkers:\n{choices}\n\n{shown}Document:\n{sample}\n\n"
        "Which chunker suits this document? Reply as JSON with chunker, params and justification."
    )


def _param_hint(name: str) -> str:
    try:
        fields = sorted(chunkers.params_model(name).model_fields)
    except (ConfigError, ImportError) as error:  # a broken plugin is listed, not fatal
        return f"(unavailable: {error})"
    return "params " + ", ".join(fields) if fields else "no params"


def profile(document: Document) -> dict[str, Any]:
    """What the heuristic looks at: length, file suffix, Python definitions, markdown headers."""
    text = document.text
    suffix = PurePosixPath(str(document.metadata.get("file_name") or document.metadata.get("doc_id") or "")).suffix
    outside_fences = _FENCED_BLOCK.sub("", text)
    return {
        "chars": len(text.strip()),
        "suffix": suffix.lower(),
        "python": suffix.lower() in _PYTHON_SUFFIXES or _looks_like_python(text),
        "markdown_headers": len(_MARKDOWN_HEADER.findall(outside_fences)),
    }


def _looks_like_python(text: str) -> bool:
    """Parses as Python and defines or imports something (prose rarely does both)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return any(isinstance(statement, kinds) for statement in tree.body)


class ChunkingJudge(ChunkingJudgeInfo, Stage):
    params: ChunkingJudgeParams

    def __init__(self, params: ChunkingJudgeParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)
        chunkers.resolve(params.default)  # a bad default is a config error now, not a fallback later
        self._allowed: list[str] | None = None

    def allowed_chunkers(self) -> list[str]:
        """The registered chunkers it may choose; read once (scanning entry points takes milliseconds)."""
        if self._allowed is None:
            if self.params.strategies is not None:
                self._allowed = list(self.params.strategies)
            else:
                self._allowed = [name for name in judge_choosable_chunkers()
                                 if name != SEMANTIC or self.params.allow_semantic]
        return list(self._allowed)

    def default_spec(self) -> ComponentSpec:
        return chunkers.resolve(self.params.default)

    def decision_key(self, document: Document) -> str | None:
        """Content key of this judge's decision for ``document``; None when off (the default is used).

        It covers the text, the file name (the heuristic reads its suffix), the judge's params
        (mode, prompt_version, sample size...), the registered chunkers and the judge model.
        """
        if not self.enabled:
            return None
        model = self.llm.backend.cache_identity() if self.params.mode == "llm" and self.llm is not None else None
        return content_key(
            "chunking-judge", self.version, self.params.key_dump(), self.allowed_chunkers(), model,
            text_sha256(document.text), document.metadata.get("file_name"), length=32,
        )

    def decide(self, document: Document) -> tuple[ComponentSpec, Judgement | None]:
        """The chunker spec for ``document`` (defaults filled in) and the recorded decision.

        Off: the default spec and no judgement, exactly as if the judge did not exist.
        """
        if not self.enabled:
            return self.default_spec(), None
        if self.params.mode == "heuristic":
            return self._heuristic(document)
        return self._llm(document)

    def _heuristic(self, document: Document) -> tuple[ComponentSpec, Judgement]:
        started = time.perf_counter()
        facts = profile(document)
        if facts["chars"] < self.params.short_doc_chars:
            name, why = "document", f"short document ({facts['chars']} < {self.params.short_doc_chars} chars)"
        elif facts["python"]:
            name, why = "code", "Python source"
        elif facts["markdown_headers"] >= self.params.min_markdown_headers:
            name, why = "markdown", f"{facts['markdown_headers']} markdown headers"
        else:
            name, why = "recursive", "plain text without headers"
        decision = {"method": "heuristic", "profile": facts, "justification": why}
        return self._validated(document, {"type": name}, decision, None, started)

    def _llm(self, document: Document) -> tuple[ComponentSpec, Judgement]:
        started = time.perf_counter()
        names = self.allowed_chunkers()
        file_name = _file_name(document) if self.params.show_file_name else None
        prompt = build_prompt(document_sample(document.text, self.params.sample_chars), names, file_name)
        try:
            result = self.ask(prompt, ChunkingReply, system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            return self._fallback(document, {"method": "llm"}, None, started, str(error))
        reply = result.parsed
        if reply is None:
            return self._fallback(document, {"method": "llm"}, result, started, result.parse_error)
        decision = {"method": "llm", "proposed": reply.model_dump(mode="json"), "justification": reply.justification}
        return self._validated(document, {"type": reply.chunker.strip(), "params": reply.params}, decision,
                               result, started)

    def _validated(self, document: Document, proposed: dict[str, Any], decision: dict[str, Any],
                   result: Any, started: float) -> tuple[ComponentSpec, Judgement]:
        name, allowed = proposed["type"], self.allowed_chunkers()
        if name not in allowed:
            return self._fallback(document, decision, result, started,
                                  f"chunker '{name}' is not one of the allowed chunkers: {', '.join(allowed)}")
        try:
            spec = chunkers.resolve(self._filled(proposed, decision))
            spec = self._sized(document, spec, decision)
            spec = self._with_file_types(spec, decision)
        except (ValueError, ImportError) as error:  # ConfigError (unknown name, bad params) is a ValueError
            return self._fallback(document, decision, result, started, str(error))
        decision.update(chunker=spec.type, params=spec.params)
        return spec, self.judgement(_summary(document), decision, result, started=started)

    def _filled(self, proposed: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
        """The reply's spec with the sizes it left out filled in (``fill_size``, ``fill_overlap``) and
        the token chunker's sizes divided by ``token_divisor``; what changed is recorded."""
        p = self.params
        try:
            fields = chunkers.params_model(proposed["type"]).model_fields
        except (ConfigError, ImportError):
            return proposed  # an unknown chunker: resolve names the valid ones
        params = dict(proposed.get("params") or {})
        filled = {name: value for name, value in (("chunk_size", p.fill_size), ("chunk_overlap", p.fill_overlap))
                  if value is not None and name in fields and name not in params}
        params.update(filled)
        if filled:
            decision["filled"] = filled
        if proposed["type"] == "token" and p.token_divisor > 1:
            divided = {name: int(params[name]) // p.token_divisor for name in ("chunk_size", "chunk_overlap")
                       if isinstance(params.get(name), (int, float))}
            params.update(divided)
            decision["token_divisor"] = p.token_divisor
        return {"type": proposed["type"], "params": params}

    def _with_file_types(self, spec: ComponentSpec, decision: dict[str, Any]) -> ComponentSpec:
        """A chosen chunker of the default's type takes the default's per-file-type rules (the
        recursive splitter's ``file_types``) unless it sets its own: the rules hold whatever chose it."""
        default = self.default_spec()
        rules = default.params.get("file_types")
        if spec.type != default.type or not rules or "file_types" in spec.params:
            return spec
        decision["file_types"] = "the default chunker's"
        return chunkers.resolve({"type": spec.type, "params": {**spec.params, "file_types": rules}})

    def _sized(self, document: Document, spec: ComponentSpec, decision: dict[str, Any]) -> ComponentSpec:
        """``spec`` scaled by the size rule of the document's file type, recorded in ``decision``;
        a scaled size the chunker refuses raises ConfigError (the caller falls back)."""
        suffix = file_suffix(document.metadata, document.id_)
        rule = self.params.size_rules.get(suffix)
        if rule is None:
            return spec
        applied: dict[str, Any] = {"suffix": suffix, **rule.model_dump(), "before": dict(spec.params)}
        if "chunk_size" not in spec.params:
            decision["size_rule"] = {**applied, "applied": False, "reason": f"chunker '{spec.type}' has no chunk_size"}
            return spec
        spec = chunkers.resolve(scaled(spec, rule))
        decision["size_rule"] = {**applied, "applied": True}
        return spec

    def _fallback(self, document: Document, decision: dict[str, Any], result: Any, started: float,
                  error: str | None) -> tuple[ComponentSpec, Judgement]:
        spec = self.default_spec()
        decision = {**decision, "action": "fell back", "chunker": spec.type, "params": spec.params}
        judgement = self.judgement(_summary(document), decision, result, started=started, fell_back=True,
                                   error=error)
        judgement.valid = False
        return spec, judgement


def _file_name(document: Document) -> str:
    return str(document.metadata.get("file_name") or document.id_)


def _summary(document: Document) -> str:
    return f"{document.id_} ({len(document.text)} chars)"
