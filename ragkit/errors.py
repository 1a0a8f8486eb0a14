"""The exceptions and message helpers every package raises or catches: the bottom of ragkit.

Nothing here imports ragkit except ``ragkit.quoting`` (itself standard library only), so any
module can raise these without an import cycle: the registry, the component bases, the
corpus, the LLM backends and the command line all meet here instead of importing one another
to catch each other's errors. Which exception a caller sees decides what a user is told:

| exception | meaning | what the user sees |
|---|---|---|
| ``ConfigError`` | a value the user wrote is wrong (a message naming it and the valid choices) | one line, exit 2 |
| ``IngestError`` | one file cannot be ingested (a reason a user can act on) | one line, exit 2; an upload skips it |
| ``LockTimeout`` | another process holds what we would wait for | one line, exit 2 |
| ``LLMError`` | one LLM call failed | judges record an invalid reply and fall back |
| ``BackendUnavailable`` | a server is not there at all: the run stops, resumable | one line, exit 3 |
| ``WebSearchError`` | a web search could not be done | an invalid ``web`` judgement, no results |

Exceptions that stay in one package live beside their code (``PdfError`` in ``corpus/pdf.py``,
``EmbeddingServerError`` in ``embedders/remote.py``, ``ModelFolderError`` in ``local_models.py``).
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ragkit.quoting import MESSAGE_CHARS, clipped, quoted


class ConfigError(ValueError):
    """A user-written value is wrong; the message names it and lists the valid choices.

    The message is clipped to ``MESSAGE_CHARS``: the values it quotes should be clipped where it
    is written (``ragkit.quoting``), and this is the guard for a place that forgot.
    """

    def __init__(self, message: str) -> None:
        super().__init__(clipped(message, MESSAGE_CHARS))


class LockTimeout(ConfigError):
    """Another process holds a lock we cannot wait for: a one-line user-facing error naming
    what was waited for and who holds it."""


class IngestError(Exception):
    """A file cannot be ingested; the message is a reason a user can act on."""

    @property
    def reason(self) -> str:
        return str(self)


class LLMError(RuntimeError):
    """A backend could not produce a reply; the message says which backend, where and why."""


class BackendUnavailable(RuntimeError):
    """The backend's server is not there at all: connection refused, unknown host, gone mid-run.

    Deliberately not an ``LLMError``. Judges and metrics turn an ``LLMError`` into an invalid
    reply recorded against the question, which is right for a call that failed and wrong for a
    server that is down: that says nothing about the configuration being compared. The executor
    stops the run on this instead, keeping what it finished, so running it again resumes.
    """

    def __init__(self, message: str, *, backend: str, url: str) -> None:
        super().__init__(message)
        self.backend = backend
        self.url = url


class LLMTimeoutError(LLMError):
    """The server accepted the request but did not answer in time."""


class WebSearchError(RuntimeError):
    """A search could not be done; the message names the provider's URL and what went wrong."""


# A validation error lists at most this many problems, each location part and message clipped:
# a list of a million bad items, or a key of 10 MB, still reads as one short line.
MAX_PROBLEMS = 5
LOCATION_PART_CHARS = 60
PROBLEM_CHARS = 300


def validation_problems(
    error: ValidationError, unknown: str, empty_location: str, model: type[BaseModel] | None = None
) -> str:
    """A pydantic error as one readable line: each bad field named, with what was wrong.

    ``unknown`` names what an extra key is ("parameter", "field"); given the validated ``model``,
    an unknown key also lists the valid keys at its place. A ConfigError raised inside a validator
    keeps its own message (without pydantic's "Value error, " prefix), and one raised by a
    whole-model validator names its field itself, so it gets no location.
    """
    problems = []
    items = error.errors(include_url=False)
    for item in items[:MAX_PROBLEMS]:
        # A key is the user's text too: each part of the location is clipped like a value.
        where = ".".join(clipped(str(part), LOCATION_PART_CHARS) for part in item["loc"]) or empty_location
        if item["type"] == "extra_forbidden":
            valid = _field_names_at(model, item["loc"][:-1]) if model is not None else []
            choices = f" (valid {unknown}s{_under(item['loc'][:-1])}: {', '.join(valid)})" if valid else ""
            problems.append(f"unknown {unknown} '{where}'{choices}")
        elif item["type"] == "value_error":
            message = clipped(item["msg"].removeprefix("Value error, "), PROBLEM_CHARS)
            problems.append(f"'{where}': {message}" if item["loc"] else message)
        elif item["type"] == "missing":
            problems.append(f"'{where}': {item['msg']}")
        else:
            problems.append(f"'{where}': {clipped(item['msg'], PROBLEM_CHARS)} (got {quoted(item['input'])})")
    if len(items) > MAX_PROBLEMS:
        problems.append(f"and {len(items) - MAX_PROBLEMS} more problem(s)")
    return "; ".join(problems).rstrip(".")


def _under(loc: tuple[int | str, ...]) -> str:
    return f" of '{'.'.join(clipped(str(part), LOCATION_PART_CHARS) for part in loc)}'" if loc else " at the top level"


def _field_names_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the pydantic model reached by following ``loc`` from ``model`` (list
    indexes and dict keys step into the item type); empty when ``loc`` leaves pydantic models."""
    annotation: Any = model
    for part in loc:
        annotation = _without_none(annotation)
        origin, arguments = get_origin(annotation), get_args(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and part in annotation.model_fields:
            annotation = annotation.model_fields[str(part)].annotation
        elif origin in (list, tuple) and arguments:
            annotation = arguments[0]
        elif origin is dict and len(arguments) == 2:
            annotation = arguments[1]
        else:
            return []
    annotation = _without_none(annotation)
    return list(annotation.model_fields) if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []


def _without_none(annotation: Any) -> Any:
    """``X`` for ``X | None``; any other annotation unchanged."""
    arguments = [argument for argument in get_args(annotation) if argument is not type(None)]
    return arguments[0] if get_origin(annotation) in (Union, UnionType) and len(arguments) == 1 else annotation
