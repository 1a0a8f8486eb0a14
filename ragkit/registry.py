"""A generic name -> component class registry; each kind declares its own instance.

A kind's registry is in its base module (``embedders/base.py``, ``llms/base.py``, ``web/base.py``,
``stages/base.py``), except chunkers' and retrievers', which sit in ``chunkers/registry.py`` and
``retrievers/registry.py`` beside their light info classes. ``Registry("embedder", builtins={...})``
knows the kind's built-in classes by their import path, in code, so the built-ins work whatever
package metadata is installed (an editable install, or none at all). Third-party components join
through the kind's entry-point group (``ragkit.chunkers`` and so on; pyproject.toml lists the
built-ins there too). A name registered in code is never looked up in the entry points, so a stale or broken
entry point for it changes nothing; a plugin's entry point that fails to load is a one-line
error naming it. A class is imported only when its name is used, so listing names stays cheap.

Validating a config and planning a grid need a component's params model and class-level
declarations (``version``, ``uses_embedder``...), not the class: a kind whose classes import a
heavy library (chunkers and retrievers subclass LlamaIndex types) names, per built-in, a light
*info* class in a module without that import (``Registry(..., infos={...})``); the component class
subclasses its info, so each declaration is written once. ``info(name)`` returns that class, or
the component class itself where there is none (plugins, classes registered at run time), so a
finished grid's re-run loads no component module at all.

This module imports no kind's base (they import it), only ``errors``, ``hashing`` and ``quoting``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypeVar

from ragkit.errors import ConfigError, validation_problems
from ragkit.hashing import content_key
from ragkit.quoting import clipped


class ComponentParams(BaseModel):
    """Base of every component's parameter model: unknown names are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The run-id rule for new parameters (other modules refer here): a parameter named in
    # ``added_fields`` is left out of the resolved spec (``Registry.resolve``) while it is at its
    # default, so an option that is off changes no run id, index id or cached result; at any other
    # value it is part of the key like any parameter. A parameter a component gains joins this set.
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

    @classmethod
    def key_version(cls, params: Mapping[str, Any]) -> int:
        """The behaviour version keyed for these params: ``version``, unless one mode's behaviour
        changed alone, when that mode's params key a later version and the others keep their
        ids (and every user's cached results of them)."""
        return cls.version

    def spec_key(self) -> str:
        dumped = self.params.key_dump()
        return content_key(self.kind, self.name, self.key_version(dumped), dumped)


def _format_validation_error(kind: str, name: str, params_model: type[BaseModel], error: ValidationError) -> str:
    valid = ", ".join(sorted(params_model.model_fields)) or "(none)"
    return f"{kind} '{name}': {validation_problems(error, 'parameter', '(params)')}. Valid parameters: {valid}."


ComponentT = TypeVar("ComponentT", bound=Component)
# What ``info`` returns: the kind's light base of declarations, or by default the kind's base class.
# Covariant: a registry of chunkers is a registry of components wherever only their infos are read.
InfoT = TypeVar("InfoT", bound=Component, default=Component, covariant=True)


class Registry(Generic[ComponentT, InfoT]):
    """The registered classes of one kind; ``ComponentT`` is that kind's base class, ``InfoT`` the
    light base its built-ins' info classes share (``info``).

    Lookup order: classes registered at run time (``register``: tests, notebooks), then the
    built-ins named in code, then the entry points of ``group`` for any other name.
    """

    def __init__(self, kind: str, group: str | None = None, builtins: Mapping[str, str] | None = None,
                 infos: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.group = group or f"ragkit.{kind}s"
        # name -> "module:Class", the format of an entry point's value.
        self.builtins: Mapping[str, str] = dict(builtins or {})
        # name -> "module:Class" of a built-in's info class (a base of the built-in's class).
        self.infos: Mapping[str, str] = dict(infos or {})
        self._extra: dict[str, type[ComponentT]] = {}
        self._loaded: dict[str, type[ComponentT]] = {}
        self._loaded_infos: dict[str, type[InfoT]] = {}

    def _entry_points(self) -> dict[str, Any]:
        """The group's entry points for names not built in (those are the code's, whatever the
        installed metadata says)."""
        return {ep.name: ep for ep in entry_points(group=self.group) if ep.name not in self.builtins}

    def names(self) -> list[str]:
        return sorted(set(self.builtins) | set(self._entry_points()) | set(self._extra))

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
        elif name in self.builtins:
            # A built-in that does not import is a bug in ragkit, not a user error: let it raise.
            cls = EntryPoint(name=name, value=self.builtins[name], group=self.group).load()
        else:
            points = self._entry_points()
            if name not in points:
                choices = ", ".join(self.names()) or "(none registered)"
                raise ConfigError(f"unknown {self.kind} '{clipped(name)}'. Valid choices: {choices}.")
            cls = self._load_plugin(name, points[name])
        self._loaded[name] = cls
        return cls

    def _load_plugin(self, name: str, point: Any) -> type[ComponentT]:
        """A plugin's class; one that cannot be imported (uninstalled, renamed, broken) is a
        one-line error naming the entry point, not a traceback from inside the plugin."""
        try:
            loaded: type[ComponentT] = point.load()
        except Exception as error:  # noqa: BLE001 - any failure inside a third-party import
            where = getattr(point, "value", "?")
            raise ConfigError(
                f"{self.kind} '{clipped(name)}' is registered by the entry point '{clipped(where)}' "
                f"(group {self.group}), which cannot be loaded: {type(error).__name__}: {clipped(str(error))}"
            ) from None
        return loaded

    def info(self, name: str) -> type[InfoT]:
        """What ``name`` declares (``Params``, ``version``, the kind's flags) without importing its
        class where a built-in names a light info class; otherwise the class itself."""
        if name in self._extra or name not in self.infos:
            # A component class is its own info: every kind's base class subclasses its info base.
            cls: Any = self.get(name)
            return cast("type[InfoT]", cls)
        if name not in self._loaded_infos:
            point = EntryPoint(name=name, value=self.infos[name], group=self.group)
            self._loaded_infos[name] = point.load()
        return self._loaded_infos[name]

    def params_model(self, name: str) -> type[ComponentParams]:
        return self.info(name).Params

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
