"""Widgets generated from a component's pydantic Params model.

A component added in a later issue (or by a plugin) appears in the experiment form with its
own bounds and help texts, without any page code: this module reads the model's fields.

- int / float with ge/gt/le/lt  -> st.number_input with those bounds
- bool                          -> st.checkbox
- Literal[...] / Enum           -> st.selectbox
- str                           -> st.text_input
- list / dict                   -> st.text_input holding JSON
- X | None                      -> the same widget, left empty for None
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Any

import annotated_types
import streamlit as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            return args[0], optional
    return annotation, False


def _bounds(field: FieldInfo, kind: type) -> tuple[Any, Any]:
    low = high = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low = item.gt + (1 if kind is int else 0.0)
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high = item.lt - (1 if kind is int else 0.0)
    return (None if low is None else kind(low)), (None if high is None else kind(high))


def field_default(field: FieldInfo) -> Any:
    if field.default is not PydanticUndefined:
        return field.default
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return PydanticUndefined


def field_widget(name: str, field: FieldInfo, key: str) -> Any:
    """Draw one field's widget; returns its value (None for an empty optional field)."""
    annotation, optional = _unwrap_optional(field.annotation)
    default = field_default(field)
    required = default is PydanticUndefined
    if required:
        default = None
    label = name + (" *" if required else "")
    help_text = field.description
    origin = typing.get_origin(annotation)

    if annotation is bool:
        return st.checkbox(label, value=bool(default), help=help_text, key=key)
    if annotation in (int, float):
        low, high = _bounds(field, annotation)
        value = default if default is not None else (None if optional or required else (low or 0))
        if value is not None:
            value = annotation(value)
        step = 1 if annotation is int else 0.01 if (low is not None and high is not None and high - low <= 1) else 0.1
        return st.number_input(label, min_value=low, max_value=high, value=value, step=annotation(step),
                               help=help_text, key=key, placeholder="(none)" if optional else None)
    if origin is typing.Literal or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        choices = list(typing.get_args(annotation)) if origin is typing.Literal else [m.value for m in annotation]
        if optional:
            choices = [None, *choices]
        current = default.value if isinstance(default, enum.Enum) else default
        index = choices.index(current) if current in choices else 0
        return st.selectbox(label, choices, index=index, help=help_text, key=key,
                            format_func=lambda c: "(none)" if c is None else str(c))
    if annotation is str:
        text = st.text_input(label, value=default or "", help=help_text, key=key)
        return None if (optional or required) and not text else text
    # Anything structured (list[str], dict...) is edited as JSON.
    text = st.text_input(label, value="" if default is None else json.dumps(default), help=(help_text or "") +
                         " (JSON)", key=key)
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        st.error(f"{name}: not valid JSON")
        return default


def params_form(model: type[BaseModel], key: str, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Widgets for every field of ``model`` (but ``exclude``); returns the params dict.

    An empty optional field is returned as None; an empty required field is left out, so the
    model's own validation names it.
    """
    params: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name in exclude:
            continue
        value = field_widget(name, field, key=f"{key}.{name}")
        required = field_default(field) is PydanticUndefined
        if value is None and required:
            continue
        params[name] = value
    return params
