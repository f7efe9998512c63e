"""The one guard between user input and a Slurm daemon's configuration.

Slurm reads slurm.conf, gres.conf, cgroup.conf, topology.conf and slurmdbd.conf (and a
slurmd ``--conf`` string) with one parser (``src/common/parse_config.c``):

- a line ends at LF; ``#`` starts a comment anywhere on the line (quotes do not protect it);
  a backslash escapes the next character and a trailing one joins the next line;
- a line is whitespace-separated ``Key=Value`` pairs; a key is letters, digits, ``_`` and
  ``.`` and is matched case-insensitively; a value is either a run of non-space characters
  or ``"…"`` (anything but ``"``).

So a CR, an LF, ``#``, ``\\``, ``"`` or another control character in a value would change the
structure of the file: they are refused. A space is harmless once the value is quoted, and
``quote`` does that; where the text is split on whitespace by someone else (the slurmd
``--conf`` string, which our entrypoint splits into words, and plugstack.conf, which SPANK
splits on whitespace without quotes) a space is refused too. Keys are CamelCase words.

The same rules are the patterns in the typed models (``CONF_KEY``, ``CONF_VALUE``,
``CONF_WORD``), so the values schema and the CRDs reject what this module rejects.

Lua plugin scripts (``job_submit.lua``, run by slurmctld as SlurmUser on every submission, and
``cli_filter.lua``, run by every sbatch/srun/salloc) are whole files, not values inside one:
no Slurm parser splits them, so line feeds, ``#``, quotes and backslashes are ordinary Lua and
pass. ``check_lua`` refuses what has no business in source code a reviewer must be able to read:

- NUL and every other C0 control character but LF and tab (CR included: Lua reads a lone CR as
  a line break, but a terminal or a diff shows it as nothing, or as text overwritten, so
  ``-- note\\rdo_something()`` looks like a comment and is code; YAML block scalars never
  produce one), and DEL;
- the Unicode bidirectional controls (U+202A–U+202E, U+2066–U+2069): they reorder how a line
  is displayed without changing what Lua parses ("Trojan Source");
- more than ``MAX_LUA`` characters (256 KiB): the script travels in the SlurmCluster and a
  ConfigMap (1 MiB each, with everything else) and slurmctld sends ``cli_filter.lua`` to every
  configless client.

Whether the text is valid Lua is `sunkctl validate`'s question (it parses it); the guard only
keeps the text honest. The pattern ``LUA_TEXT`` in the models says the same except for the
bidirectional controls (RE2 and Python's ``re`` share no escape for them, and the generated
schemas should not carry the characters themselves): those are refused here only, so the
operator reports ConfigInvalid and `sunkctl validate` a RENDER error.
"""

from __future__ import annotations

import re

from sunk.models.base import CONF_KEY, MAX_LUA
from sunk.models.base import MAX_CONF_VALUE as MAX_VALUE

_KEY = re.compile(CONF_KEY)
_BAD_VALUE = re.compile(r'[\x00-\x1f\x7f#"\\]')
_SPACE = re.compile(" ")  # other whitespace is a control character, refused above
_BAD_LUA = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


class UnsafeConfigError(ValueError):
    """A key or value that would change the structure of a Slurm file.

    ``where`` is the key path of the input (e.g. ``slurmConfig.MaxTime``), ``file`` the
    Slurm file it was going into."""

    def __init__(self, file: str, where: str, problem: str):
        self.file, self.where, self.problem = file, where, problem
        super().__init__(f"{file}: {where}: {problem}")


def _describe(char: str) -> str:
    names = {"\n": "a line feed (LF)", "\r": "a carriage return (CR)", "\t": "a tab"}
    names |= {"#": "`#` (starts a comment)", '"': '`"`', "\\": "`\\` (an escape)"}
    names[" "] = "a space (would start another Key=Value)"
    return names.get(char, f"the control character {char!r}")


def check_key(key: object, file: str, where: str) -> str:
    text = str(key)
    if not _KEY.match(text):
        raise UnsafeConfigError(
            file,
            where,
            f"key {text!r} is not a Slurm key (letters, digits and '_', starting with a letter)",
        )
    return text


def check_value(text: str, file: str, where: str, *, words: bool = False) -> str:
    """``text`` unchanged when safe; ``words``: a space is refused too."""
    if len(text) > MAX_VALUE:
        raise UnsafeConfigError(file, where, f"value is longer than {MAX_VALUE} characters")
    bad = _BAD_VALUE.search(text) or (_SPACE.search(text) if words else None)
    if bad:
        raise UnsafeConfigError(
            file, where, f"value {text[:60]!r} contains {_describe(bad.group(0))}"
        )
    return text


def check_lua(text: str, file: str, where: str) -> str:
    """A Lua plugin script unchanged when it holds no hidden characters (see the module's
    docstring); the error names the line and column."""
    if len(text) > MAX_LUA:
        raise UnsafeConfigError(file, where, f"script is longer than {MAX_LUA} characters")
    if not text.strip():
        raise UnsafeConfigError(file, where, "script is empty")
    bad = _BAD_LUA.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        char = bad.group(0)
        what = (
            f"the bidirectional control U+{ord(char):04X} (reorders what a reader sees)"
            if ord(char) > 0x7F
            else _describe(char)
        )
        raise UnsafeConfigError(file, where, f"line {line}, column {column}: {what}")
    return text


def quote(text: str, file: str, where: str) -> str:
    """A value as Slurm's parser reads it back: quoted when it holds a space."""
    check_value(text, file, where)
    return f'"{text}"' if _SPACE.search(text) or text == "" else text


def owned(key: str, keys: frozenset[str] | set[str]) -> bool:
    """Slurm matches keys case-insensitively; so do we."""
    lowered = key.lower()
    return any(lowered == k.lower() for k in keys)


def find_key(settings: dict[str, object], key: str) -> str | None:
    """The key of ``settings`` that Slurm would read as ``key`` (any case)."""
    lowered = key.lower()
    return next((k for k in settings if k.lower() == lowered), None)
