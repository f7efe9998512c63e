"""Helm's value coalescing, with provenance: which file (and line) set each key.

Helm merges the `-f` files in order (maps deep-merged, everything else replaced), applies
`--set` on top, then coalesces the result over the chart's values.yaml: a user `null`
deletes the chart's default for that key; maps merge; lists and scalars replace.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from sunk.validate.yamlload import Path

SET_FILE = "--set"


class SetError(ValueError):
    """A --set expression Helm would reject (usage error)."""


@dataclass
class Layer:
    file: str
    data: dict[str, Any]
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)
    blocks: dict[Path, int] = field(default_factory=dict)  # see yamlload.Document.blocks


def merge_maps(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Helm's mergeMaps (how -f files combine): b over a, maps merged, the rest replaced."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_maps(out[key], value)
        else:
            out[key] = value
    return out


def coalesce_over(defaults: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalesceValues: user values over chart defaults; a user null deletes a default."""
    out = copy.deepcopy(user)
    for key, default in defaults.items():
        if key in out:
            value = out[key]
            if value is None:
                del out[key]
            elif isinstance(value, dict) and isinstance(default, dict):
                out[key] = coalesce_over(default, value)
        else:
            out[key] = copy.deepcopy(default)
    return out


@dataclass
class Coalesced:
    values: dict[str, Any]
    layers: list[Layer]
    origins: dict[Path, int]

    def locate(self, path: Path) -> tuple[str, int | None, int | None]:
        """The file, line and column that set `path` (or its nearest set ancestor)."""
        for end in range(len(path), -1, -1):
            prefix = tuple(path[:end])
            index = self.origins.get(prefix)
            if index is None:
                continue
            layer = self.layers[index]
            pos = layer.positions.get(prefix)
            if pos is None and prefix:
                continue
            line, column = pos if pos else (None, None)
            return layer.file, line, column
        last = self.layers[-1]
        return last.file, None, None

    def locate_text_line(self, path: Path, text_line: int) -> tuple[str, int | None, int | None]:
        """Where line ``text_line`` (1-based) of the text at ``path`` is in its file: exact
        for a literal block scalar (`key: |`), else the key's own position."""
        file, line, column = self.locate(path)
        index = self.origins.get(tuple(path))
        if index is not None and tuple(path) in self.layers[index].blocks:
            return file, self.layers[index].blocks[tuple(path)] + text_line - 1, None
        return file, line, column

    def layer_of(self, path: Path) -> Layer:
        file = self.locate(path)[0]
        return next(layer for layer in self.layers if layer.file == file)


def _origins(layers: list[Layer]) -> dict[Path, int]:
    origins: dict[Path, int] = {}
    opaque: set[Path] = set()

    def hidden(path: Path) -> bool:
        return any(path[:i] in opaque for i in range(len(path) + 1))

    def walk(value: Any, path: Path, index: int, fresh: set[Path]) -> None:
        if hidden(path):
            return
        origins.setdefault(path, index)
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(sub, (*path, key), index, fresh)
        else:
            if isinstance(value, list):
                for i, sub in enumerate(value):
                    walk(sub, (*path, i), index, fresh)
            if path:
                fresh.add(path)

    for index in range(len(layers) - 1, -1, -1):
        fresh: set[Path] = set()
        walk(layers[index].data, (), index, fresh)
        opaque |= fresh
    return origins


def coalesce(defaults: Layer, user_layers: list[Layer]) -> Coalesced:
    user: dict[str, Any] = {}
    for layer in user_layers:
        user = merge_maps(user, layer.data)
    values = coalesce_over(defaults.data, user)
    layers = [defaults, *user_layers]
    return Coalesced(values, layers, _origins(layers))


# --------------------------------------------------------------------------- --set


_INDEX = re.compile(r"^(.*?)((?:\[[0-9]+\])+)$")
MAX_INDEX = 65536


def _split(text: str, sep: str) -> list[str]:
    """Split on unescaped `sep` outside `{…}` list braces; keeps escapes."""
    parts, current, depth, i = [], "", 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current += text[i : i + 2]
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        if char == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
        i += 1
    parts.append(current)
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def typed(value: str) -> Any:
    """strvals' typing: true/false, null, integers without a leading zero, else text."""
    lowered = value.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered == "null":
        return None
    if value == "0":
        return 0
    if re.fullmatch(r"[-+]?[1-9][0-9]*", value) and not value.startswith("0"):
        number = int(value)
        if -(2**63) <= number < 2**63:
            return number
    return value


def _key_parts(key: str, expr: str) -> list[str | int]:
    parts: list[str | int] = []
    for segment in _split(key, "."):
        match = _INDEX.match(segment)
        name, indexes = (match.group(1), match.group(2)) if match else (segment, "")
        name = _unescape(name)
        if not name:
            raise SetError(f"--set {expr}: empty key segment in {key!r}")
        parts.append(name)
        for number in re.findall(r"\[([0-9]+)\]", indexes):
            if int(number) > MAX_INDEX:
                raise SetError(f"--set {expr}: list index {number} is too large")
            parts.append(int(number))
    return parts


def _assign(target: dict[str, Any], parts: list[str | int], value: Any, expr: str) -> None:
    node: Any = target
    for here, nxt in zip(parts, [*parts[1:], None], strict=True):
        last = nxt is None
        if isinstance(here, int):
            if not isinstance(node, list):
                raise SetError(f"--set {expr}: index [{here}] on something that is not a list")
            while len(node) <= here:
                node.append(None)
            if last:
                node[here] = value
            elif not isinstance(node[here], dict | list):
                node[here] = [] if isinstance(nxt, int) else {}
            node = node[here]
        else:
            if not isinstance(node, dict):
                raise SetError(f"--set {expr}: key {here!r} on something that is not a map")
            if last:
                node[here] = value
            else:
                want_list = isinstance(nxt, int)
                current = node.get(here)
                if want_list and not isinstance(current, list):
                    node[here] = []
                elif not want_list and not isinstance(current, dict):
                    node[here] = {}
                node = node[here]


def parse_set(expr: str, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """One `--set` argument (possibly `a=1,b.c=2`) as nested values, Helm-style."""
    out = into if into is not None else {}
    for item in _split(expr, ","):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        if not sep:
            raise SetError(f"--set {expr}: key {key!r} has no value (expected key=value)")
        if not key:
            raise SetError(f"--set {expr}: missing key before '='")
        parts = _key_parts(key, expr)
        if raw.startswith("{") and raw.endswith("}"):
            inner = raw[1:-1]
            value: Any = [typed(_unescape(v)) for v in _split(inner, ",")] if inner else []
        else:
            value = typed(_unescape(raw))
        _assign(out, parts, value, expr)
    return out


def set_layer(expressions: list[str]) -> Layer | None:
    if not expressions:
        return None
    data: dict[str, Any] = {}
    for expr in expressions:
        parse_set(expr, data)
    return Layer(SET_FILE, data)
