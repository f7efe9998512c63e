"""What a migration produces: the new values and one note per decision, each with its place.

The library never prints: `sunk.cli.migrate_cmd` turns notes into lines like
`sunkctl validate`'s findings.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sunk.validate.paths import dotted
from sunk.validate.yamlload import Document

Path = tuple[str | int, ...]


class Action(StrEnum):
    """What happened to one SUNK 7.x key (the code column of the report)."""

    RENAMED = "renamed"  # carried under another key or in another form
    DROPPED = "dropped"  # not carried; the note says why and what replaces it
    NOTICE = "notice"  # carried, with something the reader must know
    FAILED = "failed"  # cannot be carried: nothing is written


class Level(StrEnum):
    NOTE = "note"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Note:
    action: Action
    level: Level
    path: str  # the 7.x key path, dotted; "" for the file as a whole
    message: str
    line: int | None = None
    column: int | None = None
    hint: str | None = None


@dataclass
class Result:
    values: dict[str, Any]
    notes: list[Note] = field(default_factory=list)
    origin: dict[Path, Path] = field(default_factory=dict)  # our key → the 7.x key it came from

    def source_of(self, path: Path) -> Path | None:
        """The 7.x key that set `path` of the output, or the nearest ancestor's."""
        for end in range(len(path), 0, -1):
            found = self.origin.get(tuple(path[:end]))
            if found is not None:
                return found
        return None

    @property
    def errors(self) -> list[Note]:
        return [n for n in self.notes if n.level == Level.ERROR]


class Migration:
    """The state of one file's migration: the source positions, the output, the notes."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.out: dict[str, Any] = {}
        self.notes: list[Note] = []
        # target path → source path that set it, to catch two 7.x keys landing on one key
        self.origin: dict[Path, Path] = {}

    # -- notes ------------------------------------------------------------------------

    def note(
        self,
        action: Action,
        level: Level,
        path: Path,
        message: str,
        hint: str | None = None,
    ) -> None:
        line, column = self._position(path)
        self.notes.append(Note(action, level, dotted(path), message, line, column, hint))

    def _position(self, path: Path) -> tuple[int | None, int | None]:
        for end in range(len(path), 0, -1):
            pos = self.doc.positions.get(tuple(path[:end]))
            if pos is not None:
                return pos
        return None, None

    def fail(self, path: Path, message: str, hint: str | None = None) -> None:
        self.note(Action.FAILED, Level.ERROR, path, message, hint)

    def drop(self, path: Path, why: str, level: Level = Level.NOTE) -> None:
        self.note(Action.DROPPED, level, path, why)

    # -- output -----------------------------------------------------------------------

    def put(self, source: Path, target: Path, value: Any) -> bool:
        """Set `target` in the output; False (and a failure) when another key set it to
        something else already."""
        first = self.origin.get(target)
        node = self.out
        for key in target[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        last = target[-1]
        if first is not None and node.get(last) != value:
            self.fail(
                source,
                f"sets {dotted(target)}, which {dotted(first)} sets to something else",
                "keep one of the two keys",
            )
            return False
        node[last] = copy.deepcopy(value)
        self.origin[target] = source
        return True

    def rename(self, source: Path, target: Path, value: Any, why: str = "") -> None:
        if self.put(source, target, value):
            detail = f" ({why})" if why else ""
            moved = f"now {value!r}" if target == source else f"→ {dotted(target)}"
            self.note(Action.RENAMED, Level.NOTE, source, moved + detail)

    def mapping(self, path: Path, value: Any) -> dict[str, Any] | None:
        """`value` when it is a map (null: an empty one); otherwise a failure and None."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        self.fail(path, f"expected a map, not {kind(value)}")
        return None


def kind(value: Any) -> str:
    """A YAML reader's name for a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a map"
