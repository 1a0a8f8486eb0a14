"""Experiment files in and out: read a YAML file, apply `--set` overrides, resolve relative
paths, validate into an ExperimentConfig (one line per problem), and write one back as YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ragkit.errors import ConfigError, validation_problems
from ragkit.experiments.config.models import ExperimentConfig
from ragkit.quoting import clipped, quoted
from ragkit.yaml_input import load_yaml

# Fields holding filesystem paths: relative values are resolved against the YAML file's folder
# (values given with --set are resolved against the current directory instead).
PATH_FIELDS = (("dataset", "path"), ("corpus", "path"))


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    target = data
    for depth, key in enumerate(keys[:-1]):
        if target.get(key) is None:
            target[key] = {}
        elif not isinstance(target[key], dict):
            section = clipped(".".join(keys[: depth + 1]))
            kind = type(target[key]).__name__
            raise ConfigError(f"--set {clipped(dotted)}: '{section}' is a {kind}, not a section with keys")
        target = target[key]
    target[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`dotted.key=value`, the value read as YAML (so numbers, lists and booleans work)."""
    if "=" not in text:
        raise ConfigError(f"--set expects dotted.key=value, got '{clipped(text)}'")
    key, raw = (part.strip() for part in text.split("=", 1))
    if not all(key.split(".")):
        raise ConfigError(f"--set {clipped(text)}: '{clipped(key)}' is not a dotted.key (e.g. dataset.limit=5)")
    return key, load_yaml(raw, f"--set {key}: value {quoted(raw)}") if raw else ""


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    for section, field in PATH_FIELDS:
        block = data.get(section)
        if isinstance(block, dict) and isinstance(block.get(field), str):
            path = Path(block[field]).expanduser()
            block[field] = str(path if path.is_absolute() else (base / path).resolve())


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"experiment file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"experiment file {path} is a folder, not a YAML file")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
                          "save it as UTF-8") from None
    except OSError as error:
        raise ConfigError(f"experiment file {path} cannot be read: {error.strerror}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of fields (name, dataset, ...) at the top level, "
                          f"got a YAML {type(data).__name__}")
    _resolve_paths(data, path.parent.resolve())
    for text in overrides or []:
        key, value = parse_override(text)
        _set_dotted(data, key, value)
    # Paths from the file are absolute by now, so only relative --set values change here.
    _resolve_paths(data, Path.cwd())
    return config_from_dict(data, source=str(path))


def config_from_dict(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source}: {validation_problems(error, 'field', '(top level)', ExperimentConfig)}") from None


def config_to_yaml(config: ExperimentConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=False), sort_keys=False)
