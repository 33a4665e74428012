"""Reading user files safely: a size cap, binary detection, and YAML with line numbers.

YAML is composed by PyYAML's safe loader into its node graph (cheap even for alias
bombs, because aliases share nodes), then converted by hand into YMap / YList values that
remember the line of every key and item. The conversion counts every node it visits,
aliases included, so a billion-laughs file stops at NODE_BUDGET instead of eating memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ddp_doctor.errors import InputError

MAX_BYTES = 10 * 1024 * 1024
"""Configs are kilobytes; a 10 MiB cap rejects logs, archives and 100 MB files quickly."""
ALIAS_BUDGET = 100_000
"""Nodes reached again through aliases, per file. Real configs reuse a few anchors; a billion-laughs
file needs this many within a few lines. Nodes reached once are bounded by MAX_BYTES already."""
MAX_DEPTH = 200


def read_text(path: Path) -> str:
    try:
        if path.is_dir():
            raise InputError(f"{path}: is a directory; expected a file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(
                f"{path}: {size / 2**20:.0f} MiB is over the {MAX_BYTES // 2**20} MiB limit for a config file; "
                "expected a manifest, compose file, Dockerfile or script"
            )
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:  # grew while we looked, or a device file
        raise InputError(f"{path}: more than {MAX_BYTES // 2**20} MiB; expected a config file")
    if b"\x00" in raw[:8192]:
        raise InputError(f"{path}: binary file (NUL bytes); expected a text config")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); expected a text config") from None


class YMap(dict):  # type: ignore[type-arg]
    """A mapping that knows its own line and the line of each key (1-based)."""

    line: int
    key_lines: dict[Any, int]
    value_lines: dict[Any, int]
    """Where each value's text starts: the line after `key: |` for a block scalar."""

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)

    def value_line(self, key: Any) -> int:
        return self.value_lines.get(key, self.line_of(key))

    def plain(self) -> dict[Any, Any]:
        return {k: _plain(v) for k, v in self.items()}


class YList(list):  # type: ignore[type-arg]
    line: int
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


def scalar_text(value: object) -> str:
    """A YAML scalar as the runtime passes it to a process: `true` stays `true` (compose and
    Kubernetes write YAML booleans lower-case), not Python's `True`."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _plain(v: Any) -> Any:
    if isinstance(v, YMap):
        return v.plain()
    if isinstance(v, YList):
        return [_plain(x) for x in v]
    return v


_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_COLLECTION_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap"}


class _Converter:
    def __init__(self, source: str) -> None:
        self.source = source
        self.seen: set[int] = set()
        self.repeats = 0
        self.scalars = yaml.SafeLoader("")  # used only for its scalar constructors

    def convert(self, node: yaml.Node, depth: int = 0) -> Any:
        if id(node) in self.seen:
            self.repeats += 1
            if self.repeats > ALIAS_BUDGET:
                raise InputError(
                    f"{self.source}: YAML aliases expand to more than {ALIAS_BUDGET} nodes (an alias bomb?); "
                    "expected a config that reuses few anchors"
                )
        else:
            self.seen.add(id(node))
        if depth > MAX_DEPTH:
            raise InputError(f"{self.source}: YAML nested deeper than {MAX_DEPTH} levels (a recursive alias?)")
        if isinstance(node, yaml.ScalarNode) and node.tag == _STR:
            return node.value  # most scalars; the constructor below is the slow path
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _COLLECTION_TAGS:
            raise InputError(
                f"{self.source}:{line}: YAML tag {node.tag} is not plain data; expected a config without tags"
            )
        if isinstance(node, yaml.MappingNode):
            m = YMap()
            m.line, m.key_lines, m.value_lines = line, {}, {}
            if any(k.tag == _MERGE for k, _ in node.value):
                self.scalars.flatten_mapping(node)  # `<<:` merge keys
            for key_node, value_node in node.value:
                key = self.convert(key_node, depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise InputError(
                        f"{self.source}:{key_node.start_mark.line + 1}: a mapping key must be a scalar"
                    ) from None
                m[key] = self.convert(value_node, depth + 1)
                m.key_lines[key] = key_node.start_mark.line + 1
                m.value_lines[key] = _text_line(value_node)
            return m
        if isinstance(node, yaml.SequenceNode):
            seq = YList()
            seq.line, seq.item_lines = line, []
            for item in node.value:
                seq.append(self.convert(item, depth + 1))
                seq.item_lines.append(_text_line(item))
            return seq
        try:
            return self.scalars.construct_object(node)
        except yaml.YAMLError as exc:
            raise InputError(f"{self.source}:{line}: {_one_line(exc)}") from None


def _text_line(node: yaml.Node) -> int:
    """1-based line where a node's text starts; a block scalar's starts after its | or > indicator."""
    block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    return node.start_mark.line + 1 + (1 if block else 0)


def _one_line(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return " ".join(str(problem).split())


def load_yaml_documents(text: str, source: str) -> list[Any]:
    """Every document of a (multi-document) YAML stream, as YMap / YList / scalars."""
    converter = _Converter(source)
    docs: list[Any] = []
    try:
        # libyaml's parser when PyYAML has it (about 10x faster on big manifests), same nodes and marks.
        loader = _FastLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is not None:
                    # Anchors do not cross documents, and ids are only unique among live nodes.
                    converter.seen.clear()
                    docs.append(converter.convert(node))
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{source}{where}: malformed YAML: {_one_line(exc)}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: malformed YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise InputError(f"{source}: YAML nested too deeply to read") from None
    return docs
