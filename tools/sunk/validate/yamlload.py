"""Values files as plain data plus the line/column of every key, read like Helm reads them.

We compose the YAML node graph with ruamel.yaml (YAML 1.1 resolution, as Helm's Go YAML
library does) and build the data ourselves, so that *every* duplicate key and every
non-string key (`on:`, `off:`, `yes:`, `1:` …) becomes a finding with its position instead
of the first one aborting the parse.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from sunk.validate.findings import YAML as YAML_ID
from sunk.validate.findings import Finding, Severity

Path = tuple[str | int, ...]
MAX_DEPTH = 200
# Bounds on what one values file may cost to read: its size, and the nodes its aliases
# expand to (a few hundred bytes of nested aliases can otherwise expand to billions).
MAX_BYTES = 1024 * 1024
MAX_NODES = 100_000


class _TooBig(Exception):
    def __init__(self, node: Node):
        self.node = node


_IGNORE = re.compile(r"#\s*sunkctl:\s*ignore\s*=\s*([A-Za-z0-9_, ]+)")
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_KEEP_AS_TEXT = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"}


@dataclass
class Document:
    """One values file: data, positions (1-based line, column) and inline ignores."""

    file: str
    data: Any
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)
    ignores: dict[int, set[str]] = field(default_factory=dict)
    documents: int = 1
    # Literal block scalars (`key: |`): the file line of the text's first line, so a finding
    # about line N of the text (a Lua script) points at the file's line.
    blocks: dict[Path, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Everything but the file's name, as JSON (`from_json` reads it back)."""
        return {
            "data": self.data,
            "positions": [[list(k), *v] for k, v in self.positions.items()],
            "ignores": [[n, sorted(rules)] for n, rules in self.ignores.items()],
            "documents": self.documents,
            "blocks": [[list(k), v] for k, v in self.blocks.items()],
        }

    @classmethod
    def from_json(cls, file: str, raw: dict[str, Any]) -> Document:
        return cls(
            file,
            raw["data"],
            {tuple(k): (line, col) for k, line, col in raw["positions"]},
            {n: set(rules) for n, rules in raw["ignores"]},
            raw["documents"],
            {tuple(k): line for k, line in raw["blocks"]},
        )

    def ignored(self, rule_id: str, line: int | None) -> bool:
        if line is None:
            return False
        return any(rule_id in self.ignores.get(n, ()) for n in (line, line - 1))


def inline_ignores(text: str) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _IGNORE.search(line)
        if match:
            ids = {part.strip().upper() for part in match.group(1).split(",") if part.strip()}
            found[number] = ids
    return found


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    return yaml


def _error(
    file: str,
    message: str,
    line: int | None = None,
    column: int | None = None,
    hint: str | None = None,
    key_path: str | None = None,
) -> Finding:
    return Finding(YAML_ID, Severity.ERROR, message, file, line, column, key_path, None, hint)


class _Builder:
    def __init__(self, file: str, yaml: YAML):
        self.file = file
        self.constructor = yaml.constructor
        self.positions: dict[Path, tuple[int, int]] = {}
        self.blocks: dict[Path, int] = {}
        self.findings: list[Finding] = []
        self.active: set[int] = set()
        self.count = 0

    def build(self, node: Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _TooBig(node)
        if id(node) in self.active or len(path) > MAX_DEPTH:
            mark = node.start_mark
            self.findings.append(
                _error(
                    self.file,
                    "recursive or too deeply nested alias",
                    mark.line + 1,
                    mark.column + 1,
                )
            )
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, path)
            if isinstance(node, SequenceNode):
                out = []
                for index, item in enumerate(node.value):
                    self.positions[(*path, index)] = _pos(item)
                    out.append(self.build(item, (*path, index)))
                return out
            if node.style == "|":  # the text starts on the line after the indicator
                self.blocks[path] = node.start_mark.line + 2
            return self._scalar(node)
        finally:
            self.active.discard(id(node))

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag in _KEEP_AS_TEXT or not node.tag.startswith("tag:yaml.org,2002:"):
            return str(node.value)
        if node.tag == _STR:
            return node.value
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ruamel's YAML 1.1 float-style advice
                return self.constructor.construct_object(node, deep=True)
        except Exception:  # a scalar Helm would read as text (e.g. an odd float)
            return str(node.value)

    def _mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, int] = {}
        merged: list[dict[str, Any]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    value = self.build(source, path)
                    if isinstance(value, dict):
                        merged.append(value)
                continue
            key = self._key(key_node, path)
            if key is None:
                continue
            line, column = _pos(key_node)
            if key in seen:
                self.findings.append(
                    _error(
                        self.file,
                        f"duplicate key `{key}` (first defined on line {seen[key]}); "
                        "Helm keeps only the last one",
                        line,
                        column,
                        "remove or merge the duplicate",
                        _dotted((*path, key)),
                    )
                )
            seen[key] = line
            self.positions[(*path, key)] = (line, column)
            out[key] = self.build(value_node, (*path, key))
        for source in merged:  # explicit keys win over `<<` merges
            for key, value in source.items():
                out.setdefault(key, value)
        return out

    def _key(self, node: Node, path: Path) -> str | None:
        line, column = _pos(node)
        if not isinstance(node, ScalarNode):
            self.findings.append(
                _error(
                    self.file,
                    "a mapping key must be a plain string, not a collection",
                    line,
                    column,
                )
            )
            return None
        if node.tag == _STR:
            return node.value
        value = self._scalar(node)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if value is None:
            text = "null"
        kind = type(value).__name__ if value is not None else "null"
        self.findings.append(
            _error(
                self.file,
                f"key `{node.value}` is read as {kind} {text!r} by YAML 1.1 (Helm), not as the "
                "text you wrote",
                line,
                column,
                f'quote it: "{node.value}":',
                _dotted((*path, str(node.value))),
            )
        )
        return text


def _pos(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _dotted(path: Path) -> str:
    from sunk.validate.paths import dotted

    return dotted(path)


def load_text(text: str, file: str) -> tuple[Document | None, list[Finding]]:
    """Parse one values file. Returns (None, findings) when it is not YAML at all, or when
    it is larger than MAX_BYTES or expands (through aliases) to more than MAX_NODES nodes."""
    if len(text) > MAX_BYTES:
        return None, [
            _error(
                file,
                f"the file is {len(text)} characters long; values files are limited to "
                f"{MAX_BYTES} (refused unread)",
            )
        ]
    yaml = _yaml()
    try:
        nodes = list(yaml.compose_all(text))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        problem = exc.problem or exc.context or "not valid YAML"
        context = ""
        if exc.context and exc.problem:
            started = exc.context_mark
            where = f" started on line {started.line + 1}" if started else ""
            context = f" ({exc.context}{where})"
        return None, [_error(file, f"YAML syntax error: {problem}{context}", line, column)]
    except (YAMLError, ValueError, RecursionError) as exc:
        return None, [_error(file, f"YAML syntax error: {str(exc).splitlines()[0]}")]
    nodes = [n for n in nodes if n is not None]
    builder = _Builder(file, yaml)
    try:
        data = builder.build(nodes[0], ()) if nodes else {}
    except RecursionError:
        return None, [_error(file, "YAML nesting is too deep")]
    except _TooBig as exc:
        line, column = _pos(exc.node)
        return None, [
            _error(
                file,
                f"the YAML expands to more than {MAX_NODES} values through aliases "
                "(an alias bomb?); refused",
                line,
                column,
                "write the values out instead of nesting aliases",
            )
        ]
    findings = builder.findings
    if data is None:
        data = {}
    doc = Document(file, data, builder.positions, inline_ignores(text), len(nodes), builder.blocks)
    return doc, findings


def load_file(path: str, display: str | None = None) -> tuple[Document | None, list[Finding]]:
    name = display or path
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES * 4 + 1)  # never read more than any text we accept
    if len(raw) > MAX_BYTES * 4:
        return None, [_error(name, f"the file is larger than {MAX_BYTES} characters; refused")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [_error(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    return load_text(text, name)
