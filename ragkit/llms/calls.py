"""The one door every LLM call goes through: cache, timing, token counts, JSON parsing.

Each reply is cached on disk under a content key of (backend, model, params, messages,
schema, max_tokens), so re-running an experiment sends nothing to the model. Usage is
recorded per call and summed per stage for the results' ``stages`` table. A backend found
unreachable is remembered until ``take_outage``, so the executor learns of it even when a
library in between (ragas) catches every exception.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel

from ragkit.caches.keys import LLM as LLM_CACHE
from ragkit.caches.keys import CacheKeyLog
from ragkit.errors import BackendUnavailable
from ragkit.hashing import content_key
from ragkit.llms.base import LLMBackend, Message
from ragkit.llms.parsing import ModelT, parse_json_reply, schema_for
from ragkit.storage.atomic import write_json_atomic

CACHE_FORMAT = 1
T = TypeVar("T")


@dataclass(frozen=True)
class LLMResult(Generic[ModelT]):
    """One reply; ``ModelT`` is the schema asked for (``parsed`` is always None without one)."""

    text: str
    parsed: ModelT | None  # the validated reply when a schema was asked for and it parsed
    valid: bool  # False only when a schema was asked for and the reply does not satisfy it
    parse_error: str | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # wall time of this call (near 0 on a cache hit)
    generation_seconds: float  # how long the backend took when it produced the reply
    cache_hit: bool
    key: str


@dataclass(frozen=True)
class CallRecord:
    stage: str
    key: str
    cache_hit: bool
    valid: bool
    seconds: float
    generation_seconds: float
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class StageUsage:
    """One row of the ``stages`` table's LLM columns.

    Tokens and generation_seconds are what the stage's replies cost when they were produced,
    so cached and fresh runs of one configuration report the same cost; ``backend_calls`` and
    ``seconds`` are what this run actually spent.
    """

    stage: str
    llm_calls: int
    backend_calls: int
    invalid_replies: int
    seconds: float
    generation_seconds: float
    prompt_tokens: int
    completion_tokens: int
    cache_hit: bool  # every call of the stage was answered from the cache
    # What the cached replies took to generate beyond the time reading them took now: added back
    # to the stage's seconds, so a configuration's latency does not depend on whether another
    # configuration (or an earlier run) happened to ask the same question first.
    replayed_seconds: float = 0.0

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


class LLMCache:
    """One JSON file per reply, written atomically: a crash never leaves half an entry."""

    def __init__(self, root: Path, key_log: CacheKeyLog | None = None) -> None:
        self.root = root
        self.key_log = key_log  # notes each key read or written, for the results folder's record

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if self.key_log is not None:
            self.key_log.note(LLM_CACHE, key)
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return None  # unreadable entries are recomputed and overwritten
        return entry if entry.get("format") == CACHE_FORMAT and entry.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        if self.key_log is not None:
            self.key_log.note(LLM_CACHE, key)
        write_json_atomic(self._path(key), {"format": CACHE_FORMAT, "key": key, **entry})


class LLMClient:
    """Calls one backend through the cache and keeps usage records; safe to share across threads."""

    def __init__(
        self, backend: LLMBackend, cache_dir: Path | None, *, clock: Callable[[], float] = time.perf_counter,
        key_log: CacheKeyLog | None = None,
    ) -> None:
        self.backend = backend
        self.cache = LLMCache(cache_dir, key_log) if cache_dir is not None else None
        self._clock = clock
        self._records: list[CallRecord] = []
        self._outages: list[BackendUnavailable] = []
        self._lock = threading.Lock()
        # [calls the backend answered, their seconds]: never drained, shared with siblings (a
        # shallow copy shares the list), read by the executor for the throughput measurements.
        self._backend_time: list[float] = [0, 0.0]

    @classmethod
    def for_data_dir(cls, backend: LLMBackend, data_dir: Path, key_log: CacheKeyLog | None = None) -> LLMClient:
        return cls(backend, data_dir / "llm_cache", key_log=key_log)

    @overload
    def call(
        self,
        prompt: str | Sequence[Message],
        *,
        stage: str,
        schema: type[ModelT],
        system: str | None = None,
        max_tokens: int | None = None,
        cache_salt: str | None = None,
    ) -> LLMResult[ModelT]: ...

    @overload
    def call(
        self,
        prompt: str | Sequence[Message],
        *,
        stage: str,
        schema: None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        cache_salt: str | None = None,
    ) -> LLMResult[BaseModel]: ...

    def call(
        self,
        prompt: str | Sequence[Message],
        *,
        stage: str,
        schema: type[BaseModel] | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        cache_salt: str | None = None,
    ) -> LLMResult[Any]:
        """``cache_salt`` (e.g. a judge's prompt version) makes a separate cache entry for the same prompt."""
        messages = _as_messages(prompt, system)
        json_schema = schema_for(schema) if schema is not None else None
        limit = max_tokens if max_tokens is not None else self.backend.params.max_tokens
        identity = self._reach(self.backend.cache_identity)  # may ask the server: an Ollama model's digest
        parts = (identity, messages, json_schema, limit) + ((cache_salt,) if cache_salt else ())
        key = content_key(*parts, length=32)

        started = self._clock()
        entry = self.cache.get(key) if self.cache is not None else None
        cache_hit = entry is not None
        if entry is None:
            reply = self._reach(lambda: self.backend.chat(messages, json_schema=json_schema, max_tokens=limit))
            entry = {
                "backend": self.backend.name,
                "model": self.backend.model_name,
                "text": reply.text,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "generation_seconds": self._clock() - started,
            }
            if self.cache is not None:
                self.cache.put(key, entry)
            with self._lock:
                self._backend_time[0] += 1
                self._backend_time[1] += float(entry["generation_seconds"])
        seconds = self._clock() - started

        # Parsed on every read, not cached: a fix in the parser applies to old replies too.
        parsed, error = parse_json_reply(entry["text"], schema) if schema is not None else (None, None)
        result = LLMResult(
            text=entry["text"],
            parsed=parsed,
            valid=error is None,
            parse_error=error,
            prompt_tokens=int(entry["prompt_tokens"]),
            completion_tokens=int(entry["completion_tokens"]),
            seconds=seconds,
            generation_seconds=float(entry["generation_seconds"]),
            cache_hit=cache_hit,
            key=key,
        )
        self._record(stage, result)
        return result

    def _record(self, stage: str, result: LLMResult[Any]) -> None:
        record = CallRecord(
            stage=stage,
            key=result.key,
            cache_hit=result.cache_hit,
            valid=result.valid,
            seconds=result.seconds,
            generation_seconds=result.generation_seconds,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )
        with self._lock:
            self._records.append(record)

    def _reach(self, work: Callable[[], T]) -> T:
        """``work()``; an unreachable backend is remembered for ``take_outage``, then re-raised."""
        try:
            return work()
        except BackendUnavailable as outage:
            with self._lock:
                self._outages.append(outage)
            raise

    def take_outage(self) -> BackendUnavailable | None:
        """The first unreachable-backend error a call of this client (or a sibling) met since the
        last take, then forget them all."""
        with self._lock:
            outages = list(self._outages)
            self._outages.clear()
        return outages[0] if outages else None

    def take_backend_time(self) -> tuple[int, float]:
        """Calls the backend answered (cache hits not counted) and their seconds since the last take."""
        with self._lock:
            calls, seconds = int(self._backend_time[0]), self._backend_time[1]
            self._backend_time[0], self._backend_time[1] = 0, 0.0
        return calls, seconds

    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    def usage_by_stage(self) -> list[StageUsage]:
        return summarise(self.records())

    def drain_usage(self) -> list[StageUsage]:
        """Usage since the last drain, then forget it: the executor calls this once per question."""
        with self._lock:
            # Emptied in place: a sibling from with_backend_params records into the same list.
            records = list(self._records)
            self._records.clear()
        return summarise(records)

    def with_own_usage(self) -> LLMClient:
        """This client recording its usage apart (same backend, cache and outages). For work that
        can outlive its wait: an evaluation that timed out keeps calling in ragas' thread, and
        through a shared client those late calls were charged to the next question's pipeline."""
        separate = copy.copy(self)
        separate._records = []
        return separate

    def with_backend_params(self, **update: Any) -> LLMClient:
        """This client with some backend parameters changed (e.g. seed and temperature for a
        re-sampled judge): its own cache keys, but the same cache, loaded model, usage records and
        outages."""
        sibling = copy.copy(self)
        sibling.backend = self.backend.with_params(**update)
        return sibling


def summarise(records: Sequence[CallRecord]) -> list[StageUsage]:
    stages: dict[str, list[CallRecord]] = {}
    for record in records:
        stages.setdefault(record.stage, []).append(record)
    return [
        StageUsage(
            stage=stage,
            llm_calls=len(group),
            backend_calls=sum(not record.cache_hit for record in group),
            invalid_replies=sum(not record.valid for record in group),
            seconds=sum(record.seconds for record in group),
            generation_seconds=sum(record.generation_seconds for record in group),
            prompt_tokens=sum(record.prompt_tokens for record in group),
            completion_tokens=sum(record.completion_tokens for record in group),
            cache_hit=all(record.cache_hit for record in group),
            replayed_seconds=sum(max(0.0, record.generation_seconds - record.seconds)
                                 for record in group if record.cache_hit),
        )
        for stage, group in stages.items()
    ]


def _as_messages(prompt: str | Sequence[Message], system: str | None) -> list[Message]:
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = [{"role": str(message["role"]), "content": str(message["content"])} for message in prompt]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return messages
