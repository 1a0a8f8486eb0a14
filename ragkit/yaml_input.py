"""YAML a user wrote (experiments, --set values, uploaded or pasted configs, corpus files), read
within bounds.

``yaml.safe_load`` builds no objects but plain data, yet a 1 KB file can still describe a value
of hundreds of megabytes: an alias (``*name``) repeats what its anchor names, and nested aliases
multiply ("eight levels of nine references" print as 312 MB). PyYAML shares the repeated objects,
so loading is cheap, but anything that walks the value afterwards (validation, an error message,
a JSON dump) pays for every repetition. ``BoundedLoader`` is ``SafeLoader`` that refuses

- aliases that would expand the document by more than ``MAX_ALIAS_NODES`` values in all,
- an alias used inside the value it names (a structure that contains itself),
- values nested more than ``MAX_DEPTH`` levels deep (PyYAML reads nesting by recursion),
- a key written twice in one mapping (YAML keeps the last one silently).

Each refusal is a PyYAML error with the line and column, so callers report it like a syntax error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

from ragkit.errors import ConfigError
from ragkit.quoting import clipped

# Values that aliases may add to one file once expanded: a config that reuses a block of
# defaults a few dozen times stays far below; a "billion laughs" reaches it within three levels.
MAX_ALIAS_NODES = 10_000
MAX_DEPTH = 100
MERGE_TAG = "tag:yaml.org,2002:merge"


class BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` within the bounds above (see the module docstring)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._alias_nodes = 0
        self._open_anchors: list[str] = []
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_document(self) -> Node | None:
        self._sizes = {}  # keyed by id(): the nodes of a finished document may be freed
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._count_alias(event)
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"values are nested more than {MAX_DEPTH} levels deep (the limit)",
                                event.start_mark)
        anchor = getattr(event, "anchor", None)
        self._depth += 1
        if anchor is not None:
            self._open_anchors.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.pop()

    def _count_alias(self, event: yaml.AliasEvent) -> None:
        if event.anchor in self._open_anchors:
            name = clipped(str(event.anchor), 100)
            raise ComposerError(None, None, f"alias *{name} is used inside the value it names", event.start_mark)
        target = self.anchors.get(event.anchor)
        if target is None:
            return  # PyYAML reports the undefined alias
        self._alias_nodes += self._expanded_size(target)
        if self._alias_nodes > MAX_ALIAS_NODES:
            raise ComposerError(
                None, None, f"aliases expand to more than {MAX_ALIAS_NODES:,} values (the limit for aliases in one "
                "file): write the repeated values out, or reference fewer of them", event.start_mark)

    def _expanded_size(self, node: Node) -> int:
        """Values ``node`` holds with every alias in it expanded; a finished node's size is kept,
        so shared nodes are walked once and the walk is as long as the file."""
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        size = 1
        if isinstance(node, SequenceNode):
            size += sum(self._expanded_size(item) for item in node.value)
        elif isinstance(node, MappingNode):
            size += sum(self._expanded_size(key) + self._expanded_size(value) for key, value in node.value)
        self._sizes[id(node)] = size
        return size

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:  # `<<: *defaults`: the keys written beside it override the merged ones
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in first_line
            except TypeError:  # an unhashable key: the base class reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{clipped(str(key), 100)}' is written twice (first on line {first_line[key]})",
                    key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class DocumentLoader(BoundedLoader):
    """The bounds without the duplicate-key rule, for files someone ingests (a corpus's YAML files
    and markdown front matter): those are read as YAML reads them, the last value winning, since
    refusing one would lose the document over a key it is not ragkit's business to police."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        return yaml.SafeLoader.construct_mapping(self, node, deep=deep)


def parse_yaml(text: str, loader: type[BoundedLoader] = BoundedLoader) -> Any:
    """The YAML document in ``text``, read by ``loader`` (PyYAML's errors pass through)."""
    return yaml.load(text, Loader=loader)  # a SafeLoader subclass: as safe as safe_load


def parse_yaml_documents(text: str) -> list[Any]:
    """Every YAML document in a corpus file's ``text`` (a ``---`` separated stream), read by
    ``DocumentLoader``."""
    return list(yaml.load_all(text, Loader=DocumentLoader))


def load_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text``; a ConfigError naming ``source``, the line and the problem."""
    try:
        return parse_yaml(text)
    except yaml.YAMLError as error:
        raise yaml_error(source, error) from None


def yaml_error(source: str, error: yaml.YAMLError) -> ConfigError:
    """PyYAML's error as one line: where (line and column), what is wrong, what it was parsing."""
    if not isinstance(error, yaml.MarkedYAMLError):  # e.g. a control character in the text
        return ConfigError(f"{source}: invalid YAML: {clipped(str(error).splitlines()[0])}")
    mark, where, context = error.problem_mark, "", ""
    if mark is not None:
        where = f", line {mark.line + 1}, column {mark.column + 1}"
    if error.context:
        started = f" started on line {error.context_mark.line + 1}" if error.context_mark else ""
        context = f" ({clipped(error.context)}{started})"
    return ConfigError(f"{source}{where}: invalid YAML: {clipped(str(error.problem), 400)}{context}")
