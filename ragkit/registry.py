"""Name -> component class registries, one per kind, filled from entry points.

Built-in components register through the same ``ragkit.<kind>`` entry-point groups as
third-party plugins (see pyproject.toml). A class is imported only when its name is used,
so listing names and validating configs stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from types import UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragkit.hashing import content_key
from ragkit.quoting import MESSAGE_CHARS, clipped, quoted

if TYPE_CHECKING:  # only for the registries' annotations: these modules import this one
    from ragkit.chunkers.base import Chunker
    from ragkit.embeddings import Embedder
    from ragkit.retrievers.base import Retriever


class ConfigError(ValueError):
    """A user-written value is wrong; the message names it and lists the valid choices.

    The message is clipped to ``MESSAGE_CHARS``: the values it quotes should be clipped where it
    is written (``ragkit.quoting``), and this is the guard for a place that forgot.
    """

    def __init__(self, message: str) -> None:
        super().__init__(clipped(message, MESSAGE_CHARS))


class ComponentParams(BaseModel):
    """Base of every component's parameter model: unknown names are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Parameters added after run ids were first published. At their default they are left out of
    # the resolved spec (``Registry.resolve``), so adding an option that is off changes no id and
    # no cached result; set to anything else, they are part of the key like any parameter.
    added_fields: ClassVar[frozenset[str]] = frozenset()
    # How to reach a server (timeouts, retries), not what it computes: never part of a content
    # key at any value, so raising a timeout reuses every cached vector and result.
    transport_fields: ClassVar[frozenset[str]] = frozenset()

    def key_dump(self) -> dict[str, Any]:
        """The parameters as JSON, without the ``added_fields`` still at their default."""
        dumped = self.model_dump(mode="json")
        for name in self.added_fields:
            field = type(self).model_fields[name]
            if name in dumped and dumped[name] == _json_default(field):
                del dumped[name]
        return dumped


def _json_default(field: Any) -> Any:
    """A field's default as JSON (what ``model_dump(mode="json")`` writes for it)."""
    value = field.get_default(call_default_factory=True)
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


class ComponentSpec(BaseModel):
    """How a component is written in an experiment config: ``{type, params}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(description="Registered component name, e.g. 'recursive' or 'bm25'.")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of that component.")


class Component:
    """Shared surface of every registered component: validated params and a content key.

    ``version`` is part of the key so that a change in a component's behaviour invalidates
    everything cached from its older outputs.
    """

    kind: ClassVar[str] = "component"
    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    Params: ClassVar[type[ComponentParams]] = ComponentParams
    # An instance of ``Params``; a subclass narrows the annotation to its own params model.
    params: ComponentParams

    def spec_dict(self) -> dict[str, Any]:
        """The resolved spec (``Registry.resolve``): options added later are left out at their default."""
        return {"type": self.name, "params": self.params.key_dump()}

    def spec_key(self) -> str:
        return content_key(self.kind, self.name, self.version, self.params.key_dump())


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


def _format_validation_error(kind: str, name: str, params_model: type[BaseModel], error: ValidationError) -> str:
    valid = ", ".join(sorted(params_model.model_fields)) or "(none)"
    return f"{kind} '{name}': {validation_problems(error, 'parameter', '(params)')}. Valid parameters: {valid}."


ComponentT = TypeVar("ComponentT", bound=Component)


class Registry(Generic[ComponentT]):
    """The registered classes of one kind; ``ComponentT`` is that kind's base class."""

    def __init__(self, kind: str, group: str | None = None) -> None:
        self.kind = kind
        self.group = group or f"ragkit.{kind}s"
        self._extra: dict[str, type[ComponentT]] = {}
        self._loaded: dict[str, type[ComponentT]] = {}

    def _entry_points(self) -> dict[str, Any]:
        return {ep.name: ep for ep in entry_points(group=self.group)}

    def names(self) -> list[str]:
        return sorted(set(self._entry_points()) | set(self._extra))

    def register(self, name: str, cls: type[ComponentT]) -> None:
        """Register a class directly (tests and notebooks); packages should use entry points."""
        self._extra[name] = cls
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        self._extra.pop(name, None)
        self._loaded.pop(name, None)

    @contextmanager
    def registered(self, name: str, cls: type[ComponentT]) -> Iterator[None]:
        """Register ``cls`` for the duration of a block, so tests leave the registry as they found it."""
        self.register(name, cls)
        try:
            yield
        finally:
            self.unregister(name)

    def get(self, name: str) -> type[ComponentT]:
        if name in self._loaded:
            return self._loaded[name]
        cls: type[ComponentT]
        if name in self._extra:
            cls = self._extra[name]
        else:
            points = self._entry_points()
            if name not in points:
                choices = ", ".join(self.names()) or "(none registered: is ragkit installed with pip?)"
                raise ConfigError(f"unknown {self.kind} '{clipped(name)}'. Valid choices: {choices}.")
            cls = points[name].load()
        self._loaded[name] = cls
        return cls

    def params_model(self, name: str) -> type[ComponentParams]:
        return self.get(name).Params

    def validate_params(self, name: str, params: dict[str, Any]) -> ComponentParams:
        model = self.params_model(name)
        try:
            return model.model_validate(params)
        except ValidationError as error:
            raise ConfigError(_format_validation_error(self.kind, name, model, error)) from None

    def build(self, spec: ComponentSpec | str | dict[str, Any], **dependencies: Any) -> Any:
        """Instantiate a component; heavy resources load later, on first use."""
        spec = as_spec(spec)
        params = self.validate_params(spec.type, spec.params)
        # Each kind's constructor takes its own dependencies (an index, an LLM client...): untyped here.
        factory: Any = self.get(spec.type)
        return factory(params, **dependencies)

    def resolve(self, spec: ComponentSpec | str | dict[str, Any]) -> ComponentSpec:
        """The spec with every default filled in: what a run id is computed from."""
        spec = as_spec(spec)
        params = self.validate_params(spec.type, spec.params)
        return ComponentSpec(type=spec.type, params=params.key_dump())


def as_spec(value: ComponentSpec | str | dict[str, Any]) -> ComponentSpec:
    if isinstance(value, ComponentSpec):
        return value
    if isinstance(value, str):
        return ComponentSpec(type=value)
    return ComponentSpec.model_validate(value)


chunkers: Registry[Chunker] = Registry("chunker")
embedders: Registry[Embedder] = Registry("embedder")
retrievers: Registry[Retriever] = Registry("retriever")
