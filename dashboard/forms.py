"""Widgets generated from a component's pydantic Params model.

A component added in a later issue (or by a plugin) appears in the experiment form with its
own bounds and help texts, without any page code: this module reads the model's fields.

- int / float with ge/gt/le/lt  -> st.number_input with those bounds
- bool                          -> st.checkbox
- Literal[...] / Enum           -> st.selectbox
- str                           -> st.text_input
- list / dict                   -> st.text_input holding JSON
- X | None                      -> the same widget, left empty for None

Judges and LLM backends get their own small forms on top: a judge's mode selector offers only
the modes its class declares, and its params come from the same schema-driven widgets.
"""

from __future__ import annotations

import enum
import json
import sys
import types
import typing
from typing import Any, cast

import annotated_types
import streamlit as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ragkit.experiments.config import MODE_ORDER, MODEL_MODES, JudgeChoice, judge_specs
from ragkit.json_input import JsonInputError, parse_json
from ragkit.llms.base import llms
from ragkit.settings import get_settings
from ragkit.stages.base import STAGES


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            return args[0], optional
    return annotation, False


def _bounds(field: FieldInfo, kind: type) -> tuple[Any, Any]:
    """The bounds of an int or float field (``kind``); annotated_types types them only as comparable."""
    low = high = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low = cast(float, item.gt) + (1 if kind is int else 0.0)
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high = cast(float, item.lt) - (1 if kind is int else 0.0)
    return (None if low is None else kind(low)), (None if high is None else kind(high))


def field_default(field: FieldInfo) -> Any:
    if field.default is not PydanticUndefined:
        return field.default
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return PydanticUndefined


def field_widget(name: str, field: FieldInfo, key: str, default: Any = PydanticUndefined) -> Any:
    """Draw one field's widget; returns its value (None for an empty optional field).

    ``default`` replaces the field's own default (e.g. a URL taken from the settings).
    """
    annotation, optional = _unwrap_optional(field.annotation)
    default = field_default(field) if default is PydanticUndefined else default
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
    # Anything structured (list[str], dict, a nested model...) is edited as JSON.
    if isinstance(default, BaseModel):
        default = default.model_dump(mode="json")
    text = st.text_input(label, value="" if default is None else json.dumps(default), help=(help_text or "") +
                         " (JSON)", key=key)
    if not text.strip():
        return None
    try:
        return parse_json(text)
    except JsonInputError as error:
        st.error(f"{name}: not valid JSON ({error.detail})")
        return default


def params_form(model: type[BaseModel], key: str, exclude: tuple[str, ...] = (),
                defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Widgets for every field of ``model`` (but ``exclude``); returns the params dict.

    ``defaults`` overrides the model's defaults for some fields. An empty optional field is
    returned as None; an empty required field is left out, so the model's own validation names it.
    """
    params: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name in exclude:
            continue
        value = field_widget(name, field, key=f"{key}.{name}", default=(defaults or {}).get(name, PydanticUndefined))
        required = field_default(field) is PydanticUndefined
        if value is None and required:
            continue
        params[name] = value
    return params


# --- judges and LLM backends -----------------------------------------------------------------------

BOTH = "both"
ALL_MODES = "all"
AUTO_BACKEND = "auto"
# A backend's fields drawn in the open; the rest of its params sit in an expander.
BACKEND_MAIN_FIELDS = ("model", "base_url")


def judge_mode_choices(modes: tuple[str, ...]) -> list[str]:
    """What a judge's selector offers: each mode it has, "both" (off + its strongest mode) and,
    for a judge with three modes that need no model folder, "all" (one grid point each); the
    modes that load a local model (cross_encoder, nli) come last, never inside "all", since each
    needs its folder set."""
    plain = [mode for mode in MODE_ORDER if mode in modes and mode not in MODEL_MODES]
    choices = list(plain)
    if "off" in modes and len(modes) > 1:
        choices.append(BOTH)
    if len(plain) > 2:
        choices.append(ALL_MODES)
    return choices + [mode for mode in MODE_ORDER if mode in modes and mode in MODEL_MODES]


def _judge_help(cls: type) -> str:
    module = sys.modules.get(cls.__module__)
    return ((module.__doc__ if module else None) or cls.__doc__ or "").strip().split("\n", 1)[0]


def judge_choice(name: str, key: str) -> dict[str, Any] | None:
    """A judge's mode selector and, unless it is off, its params; the config's ``judges.<name>``
    value, or None for off (a judge that is off is as if it were not configured)."""
    cls = STAGES.get(name)
    choices = judge_mode_choices(cls.modes)
    modes = [choice for choice in choices if choice not in (BOTH, ALL_MODES, *MODEL_MODES)]

    def label(choice: str) -> str:
        if choice == BOTH:
            both = [spec.params["mode"] for spec in judge_specs(name, JudgeChoice(mode=[BOTH]))]
            return f"both ({' + '.join(both)})"
        if choice == ALL_MODES:
            return f"all ({' + '.join(modes)})"
        return choice

    choice = st.radio(name, choices, horizontal=True, key=f"{key}.mode", help=_judge_help(cls), format_func=label)
    if choice == "off":
        return None
    with st.expander(f"{name} parameters"):
        params = params_form(cls.Params, key=f"{key}.params", exclude=("mode",))
    return {"mode": modes if choice == ALL_MODES else choice, "params": params}


def llm_backend_choice(key: str) -> dict[str, Any] | None:
    """The LLM backend every role uses: None for auto (decided when the run starts), else ``{type, params}``."""
    backend = st.radio(
        "LLM backend", [AUTO_BACKEND, *llms.names()], horizontal=True, key=key,
        help="auto: ollama when a server answers at RAGKIT_OLLAMA_URL when the run starts, else the "
             "embedded local model.",
    )
    if backend == AUTO_BACKEND:
        return None
    model = llms.params_model(backend)
    settings = get_settings()
    # The URL and model the settings name, so "ollama" means the server the sidebar probes.
    defaults = {"model": settings.ollama_model, "base_url": settings.ollama_url} if backend == "ollama" else {}
    main = [field for field in BACKEND_MAIN_FIELDS if field in model.model_fields]
    params = params_form(model, key=f"{key}.{backend}", defaults=defaults,
                         exclude=tuple(field for field in model.model_fields if field not in main))
    with st.expander(f"{backend} parameters"):
        params |= params_form(model, key=f"{key}.{backend}", exclude=tuple(main))
    return {"type": backend, "params": params}
