"""Process-wide settings read from the environment (prefix ``RAGKIT_``).

Only defaults and limits live here; anything that defines an experiment lives in its config,
so two configurations never share hidden state.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_MODEL = "llama3.2"
DEFAULT_ALLOWED_TYPES = ("pdf", "docx", "txt", "md", "html", "htm", "csv", "json", "jsonl", "yaml", "yml",
                         # source code (ragkit.corpus.parsers.code.CODE_LANGUAGES)
                         "py", "pyi", "js", "ts", "java", "go", "rs", "c", "h", "cpp", "hpp", "rb", "sh", "sql", "toml")
ENV_PREFIX = "RAGKIT_"
TOKEN_ENV = f"{ENV_PREFIX}DASHBOARD_TOKEN"


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports one), at most 64."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 64))


class RagkitSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    data_dir: Path = Field(
        default=Path("~/.ragkit"),
        description="Root of every store: corpora, chunk sets, indexes, caches.",
    )
    results_dir: Path | None = Field(
        default=None, description="Where experiments write results; default: <data_dir>/results."
    )
    allowed_types: tuple[str, ...] = Field(
        default=DEFAULT_ALLOWED_TYPES,
        description="File extensions (without the dot) that ingestion accepts.",
    )
    max_file_mb: float = Field(default=50.0, gt=0, description="Largest single file ingested, in MB.")
    max_total_mb: float = Field(default=2000.0, gt=0, description="Largest total size of one ingestion, in MB.")
    pdf_timeout_s: float = Field(
        default=60.0, gt=0, description="Longest time one PDF may take to parse; a slower file is skipped."
    )
    pdf_workers: int = Field(
        default_factory=available_cores, ge=1, le=64,
        description="PDFs parsed at once during ingestion, each in its own worker process; default: the cores "
                    "this process may use.",
    )
    max_value_chars: int = Field(
        default=10_000_000, ge=1, le=1_000_000_000,
        description="Longest string (a value or a key) a JSON or JSONL file a user gives may hold, in characters: "
                    "question sets, import files, dataset corpora (a corpus.jsonl text is one value), reviews, "
                    "ingested JSON. A longer one refuses the file, naming the line.",
    )
    max_question_chars: int = Field(
        default=10_000, ge=1, le=10_000_000,
        description="Longest question text, in characters; a question set holding a longer one is refused, "
                    "naming the question, so it never reaches an embedder or an LLM.",
    )
    max_answer_chars: int = Field(
        default=10_000, ge=1, le=10_000_000,
        description="Longest reference answer (each alternative, each part), in characters; a longer one refuses "
                    "the question set, naming the question. Reference contexts (ragas, LlamaIndex) are only "
                    "looked up in the corpus, never sent on, and are bounded by max_value_chars.",
    )
    ollama_url: str = Field(default=DEFAULT_OLLAMA_URL, description="Where an Ollama server is looked for.")
    ollama_model: str = Field(default=DEFAULT_OLLAMA_MODEL, description="Ollama model used when a config names none.")
    embed_batch_size: int = Field(default=64, ge=1, le=4096, description="Chunks embedded per batch.")
    model_cache_dir: Path | None = Field(
        default=None,
        description="Where models made from shipped weights (minilm's ONNX export) are cached, once for every data "
                    "directory; default: $XDG_CACHE_HOME/ragkit (~/.cache/ragkit).",
    )
    minilm_runtime: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="What runs the bundled minilm embedder: auto is ONNX Runtime (its fp32 export) when onnx and "
                    "onnxruntime are installed, else torch; the vectors agree within 1e-5, so its identity is one.",
    )
    build_window_rows: int = Field(
        default=65_536, ge=0, le=10_000_000,
        description="Chunks per window of a streamed build: chunk sets are written, embedded and indexed this many "
                    "rows at a time, so memory does not grow with the corpus; 0 = the whole chunk set in memory at "
                    "once. Same chunk set rows and index rows either way; a chunk set "
                    "larger than a window is embedded in other batches (shortest first within each window).",
    )
    shared_artefacts: str | None = Field(
        default=None, pattern=r"^s3://[^/]+",
        description="s3://bucket/prefix where the machines of a cluster share chunk sets and indexes "
                    "(ragkit.artefacts.sharing); unset: each data directory builds its own.",
    )
    remote_results: str | None = Field(
        default=None, pattern=r"^s3://[^/]+",
        description="s3://bucket/prefix whose experiments (each a prefix under it written by "
                    "`ragkit run --out s3://bucket/prefix/NAME`) the dashboard lists beside the local ones.",
    )
    dashboard_token: SecretStr | None = Field(
        default=None,
        description="Access token the dashboard asks for before any page; required to bind beyond 127.0.0.1.",
    )

    def resolved_data_dir(self) -> Path:
        path = self.data_dir.expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def resolved_model_cache_dir(self) -> Path:
        default = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "ragkit"
        path = (self.model_cache_dir or default).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def results_root(self) -> Path:
        path = self.results_dir.expanduser().resolve() if self.results_dir else self.resolved_data_dir() / "results"
        path.mkdir(parents=True, exist_ok=True)
        return path


@lru_cache(maxsize=1)
def get_settings() -> RagkitSettings:
    # Not at module level: the registry sits above settings.
    from ragkit.errors import ConfigError

    try:
        return RagkitSettings()
    except ValidationError as error:
        problems = "; ".join(
            f"{ENV_PREFIX}{'_'.join(map(str, item['loc'])).upper()}: {item['msg']} (got {item['input']!r})"
            for item in error.errors()
        )
        raise ConfigError(f"bad environment setting: {problems}") from None
    except SettingsError as error:  # a value that should be JSON (a list) and is not
        raise ConfigError(f"bad environment setting: {error}; write a list as JSON, "
                          f"e.g. {ENV_PREFIX}ALLOWED_TYPES='[\"pdf\", \"txt\"]'") from None
