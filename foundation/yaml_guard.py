"""The guards of a config file's reader: a key given twice, an alias bomb, nesting past the
stack, and a parser's error told by position (never by quoting a line that may hold a
password). ``foundation.config.load_file`` turns each into a ``ConfigError`` naming the file.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = [
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "DuplicateKey",
    "TooLarge",
    "UniqueKeyLoader",
    "check_depth",
    "syntax_error",
    "unique_pairs",
]


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key given twice in one mapping (PyYAML keeps the
    last one silently, so a repeated `lr:` would quietly replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            line = key_node.start_mark.line + 1
            if first != line:
                raise DuplicateKey(
                    f"line {line}: key {key!r} is given twice (first on line {first}); keep one"
                )
        return super().construct_mapping(node, deep)

    def get_single_data(self) -> Any:
        """The document, once its aliases are known to expand to at most `MAX_YAML_VALUES`
        values nested at most `MAX_YAML_DEPTH` deep: anchors nested in anchors (a "billion
        laughs") build a small graph cheaply, but every walk of its values (the checks of
        non-finite numbers, pydantic) would take forever, or recurse past Python's stack."""
        node = self.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, 0)
        return self.construct_document(node)


MAX_YAML_VALUES = 100_000  # a study is a few hundred values; 10^5 is an alias bomb, not a spec
MAX_YAML_DEPTH = 64  # a study nests 4 levels deep; 64 leaves room and stays far off the stack


def check_depth(text: str) -> None:
    """`TooLarge` if collections nest over `MAX_YAML_DEPTH` levels, read from the parser's
    events (a loop: PyYAML's composer recurses once per level, and 1,500 brackets took it 4 s
    to end in a RecursionError)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise TooLarge(
                    f"line {event.start_mark.line + 1}: values nest over {MAX_YAML_DEPTH} levels "
                    "deep; a config nests a few: fix the brackets or the indentation there"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _expanded_size(node: yaml.Node, sizes: dict[int, int], depth: int) -> int:
    """How many values `node` holds once every alias is expanded, counted over the graph's
    nodes once each (an alias is the same node object as its anchor); `TooLarge` past
    `MAX_YAML_VALUES` values or `MAX_YAML_DEPTH` levels."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    line = node.start_mark.line + 1
    if depth > MAX_YAML_DEPTH:
        raise TooLarge(
            f"line {line}: values nest over {MAX_YAML_DEPTH} levels deep; a config nests a few: "
            "fix the brackets or the indentation there"
        )
    sizes[id(node)] = MAX_YAML_VALUES + 1  # an alias inside its own anchor: endless
    count = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [item for pair in node.value for item in pair]
    else:
        children = []
    for child in children:
        count += _expanded_size(child, sizes, depth + 1)
        if count > MAX_YAML_VALUES:
            raise TooLarge(
                f"line {line}: its aliases (`*name`) expand to over {MAX_YAML_VALUES:,} values "
                "(anchors nested in anchors, or an alias inside its own anchor); a config is "
                "far smaller: write the values out"
            )
    sizes[id(node)] = count
    return count


class DuplicateKey(Exception):
    pass


class TooLarge(Exception):
    pass


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise DuplicateKey(f"key {key!r} is given twice in one object; keep one")
    return dict(pairs)


def syntax_error(err: Exception) -> str:
    """A parser error in one line, by position, never quoting the file's text (a line may
    hold a password)."""
    if isinstance(err, json.JSONDecodeError):
        return f"line {err.lineno}, column {err.colno}: {err.msg}"
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, problem = getattr(err, "context", None), getattr(err, "problem", None)
    started = getattr(err, "context_mark", None)
    if context and started is not None:
        context += f" (from line {started.line + 1}, column {started.column + 1})"
    problem = problem or type(err).__name__
    return where + (f"{context}: {problem}" if context else problem)
