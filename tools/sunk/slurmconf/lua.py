"""Slurm's Lua plugin scripts: job_submit.lua (slurmctld) and cli_filter.lua (the clients).

Where they are read: both plugins read their script beside the slurm.conf in use
(``get_extra_conf_path``): the controller's /etc/slurm, a login Pod's /etc/slurm, and on a
configless slurmd the cache it fetched from slurmctld (slurmctld serves ``cli_filter.lua`` to
slurmd and to configless clients with slurm.conf, never ``job_submit.lua``). So the operator
mounts ``job_submit.lua`` into the controller only and ``cli_filter.lua`` into the controller
(to serve it) and the login Pods; compute Pods get it from slurmctld.

Changes need no restart: job_submit/lua reloads its script when the file's mtime changes (a
script that does not load is logged and the previous one kept), and every sbatch/srun/salloc
loads cli_filter.lua afresh. The controller's reconfigure loop pushes a changed cli_filter.lua
to the slurmds (``scontrol reconfigure``); it leaves job_submit.lua alone, because Slurm
24.11's reconfigure restarts slurmctld, and a slurmctld that starts with a job_submit.lua that
does not load exits ("fatal: failed to initialize job_submit plugin"). So the renderer
refuses an inline script that does not parse as Lua 5.1 — Debian's Slurm 24.11, in our images,
embeds Lua 5.1 (``liblua5.1-0``) — besides the guard's character checks
(sunk.slurmconf.guard.check_lua); a ConfigMap reference is mounted as is (the operator does
not read it).

How: luaparser's ANTLR grammar (Lua 5.4 syntax, pure Python), driven with an error listener of
our own so the first error comes back with its line and column (luaparser's ``ast.parse``
bails out without them); ``newer_syntax`` then finds, from the tokens, what Lua 5.1 refuses.
The functions Slurm requires (``REQUIRED``) are looked for by `sunkctl validate` only (a warning):
a definition hidden in a block or built at run time cannot be seen statically.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

from sunk.models.values import SlurmConfig
from sunk.slurmconf.guard import check_lua

JOB_SUBMIT = "job_submit.lua"
CLI_FILTER = "cli_filter.lua"
# File name → the values key that sets it.
KEYS = {JOB_SUBMIT: "slurmConfig.jobSubmitLua", CLI_FILTER: "slurmConfig.cliFilterLua"}
# The files each kind of Pod reads.
CONTROLLER_FILES = (JOB_SUBMIT, CLI_FILTER)
CLIENT_FILES = (CLI_FILTER,)
LUA_RUNTIME = "5.1"
# The functions each plugin looks up after loading its script (Slurm 24.11:
# src/plugins/job_submit/lua, src/plugins/cli_filter/lua).
REQUIRED = {
    JOB_SUBMIT: ("slurm_job_submit", "slurm_job_modify"),
    CLI_FILTER: ("slurm_cli_setup_defaults", "slurm_cli_pre_submit", "slurm_cli_post_submit"),
}


class LuaError(ValueError):
    """An inline script Slurm's Lua would not load; names the file, key and line."""

    def __init__(self, file: str, where: str, problem: str):
        self.file, self.where, self.problem = file, where, problem
        super().__init__(f"{file}: {where}: {problem}")


def render_lua(config: SlurmConfig) -> dict[str, str]:
    """The inline scripts, through the guard and the parser (a ConfigMap reference is mounted
    as is)."""
    out = {}
    for name, script in config.lua().items():
        if script.script is None:
            continue
        where = f"{KEYS[name]}.script"
        text = check_lua(script.script, name, where)
        problem = load_error(text)
        if problem is not None:
            raise LuaError(name, where, problem)
        out[name] = text
    return out


def load_error(text: str) -> str | None:
    """Why Lua 5.1 would not load ``text`` (`line N, column M: …`), or None."""
    error = syntax_error(text)
    if error is not None:
        return f"line {error.line}, column {error.column}: {error.message}"
    newer = newer_syntax(text)
    if newer is not None:
        return (
            f"line {newer.line}, column {newer.column}: {newer.message} is not Lua "
            f"{LUA_RUNTIME} (Debian's Slurm 24.11, in the opensunk images)"
        )
    return None


@dataclass(frozen=True)
class LuaSyntaxError:
    line: int  # 1-based, in the script
    column: int  # 1-based
    message: str


def _parse(text: str) -> list[LuaSyntaxError]:
    from antlr4 import CommonTokenStream, InputStream
    from antlr4.error.ErrorListener import ErrorListener
    from luaparser.parser.LuaLexer import LuaLexer
    from luaparser.parser.LuaParser import LuaParser

    errors: list[LuaSyntaxError] = []

    class Collect(ErrorListener):
        def syntaxError(self, recognizer, offending, line, column, msg, e):
            errors.append(LuaSyntaxError(line, column + 1, msg))

    lexer = LuaLexer(InputStream(text))
    lexer.removeErrorListeners()
    lexer.addErrorListener(Collect())
    parser = LuaParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(Collect())
    # The generated parser recurses several frames per nesting level: room for MAX_NESTING.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, PARSE_RECURSION))
    try:
        parser.start_()
    finally:
        sys.setrecursionlimit(limit)
    return errors


# Lua 5.1 refuses more than 200 nested syntax levels (LUAI_MAXCCALLS: "chunk has too many
# syntax levels"), and every bracket or block below costs at least one; the check also keeps
# the ANTLR parser, whose prediction cost grows with the nesting, from a hostile script.
MAX_NESTING = 200
PARSE_RECURSION = 10_000
_OPEN = frozenset({"OP", "OCU", "OB", "FUNCTION", "DO", "IF", "REPEAT"})
_CLOSE = frozenset({"CP", "CCU", "CB", "END", "UNTIL"})


@dataclass(frozen=True)
class _Token:
    kind: str  # the lexer's symbolic name, e.g. NAME, OP, SS
    line: int
    column: int  # 1-based
    start: int  # offsets in the text
    stop: int


def text_of(text: str, token: _Token) -> str:
    return text[token.start : token.stop + 1]


@lru_cache(maxsize=16)
def _tokens(text: str) -> tuple[_Token, ...]:
    """The script's tokens (comments and whitespace left out); linear in the text."""
    from antlr4 import InputStream, Token
    from luaparser.parser.LuaLexer import LuaLexer

    lexer = LuaLexer(InputStream(text))
    lexer.removeErrorListeners()
    names = LuaLexer.symbolicNames
    return tuple(
        _Token(
            names[t.type] if 0 <= t.type < len(names) else "",
            t.line,
            t.column + 1,
            t.start,
            t.stop,
        )
        for t in lexer.getAllTokens()
        if t.channel == Token.DEFAULT_CHANNEL
    )


def _too_deep(tokens: tuple[_Token, ...]) -> LuaSyntaxError | None:
    depth = 0
    for token in tokens:
        if token.kind in _OPEN:
            depth += 1
            if depth > MAX_NESTING:
                return LuaSyntaxError(
                    token.line,
                    token.column,
                    f"nested more than {MAX_NESTING} levels deep (Lua 5.1's limit)",
                )
        elif token.kind in _CLOSE:
            depth -= 1
    return None


@lru_cache(maxsize=16)
def syntax_error(text: str) -> LuaSyntaxError | None:
    """The first syntax error of ``text`` (the rest follow from it), or None."""
    deep = _too_deep(_tokens(text))
    if deep is not None:
        return deep
    try:
        errors = _parse(text)
    except RecursionError:  # not expected below MAX_NESTING; never a crash
        return LuaSyntaxError(1, 1, "nested too deeply to check")
    return min(errors, key=lambda e: (e.line, e.column)) if errors else None


def global_functions(text: str) -> set[str]:
    """Names the script's top level defines as globals, read from the tokens:
    `function name(...)` and `name = ...` / `a, b = ...` outside any block or bracket (Slurm
    checks the globals after running the chunk, so definitions made in a block, through
    `_G[...]` or by a called function are not seen here)."""
    found: set[str] = set()
    depth = 0
    pending: list[str] = []  # names of an assignment's left side so far
    tokens = _tokens(text)
    for index, token in enumerate(tokens):
        before = tokens[index - 1].kind if index else ""
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        if depth == 0 and token.kind == "FUNCTION" and before != "LOCAL" and after:
            following = tokens[index + 2] if index + 2 < len(tokens) else None
            if after.kind == "NAME" and following and following.kind == "OP":
                found.add(text_of(text, after))
        if token.kind in _OPEN:
            depth += 1
        elif token.kind in _CLOSE:
            depth -= 1
        if depth != 0:
            pending = []
            continue
        if token.kind == "NAME" and before not in ("DOT", "COL", "LOCAL", "FOR"):
            if before != "COMMA" or pending:
                pending.append(text_of(text, token))
        elif token.kind == "EQ":
            found.update(pending)
            pending = []
        elif token.kind != "COMMA":
            pending = []
    return found


def missing_functions(name: str, text: str) -> list[str]:
    """The functions Slurm requires of the script ``name`` that its top level lacks."""
    defined = global_functions(text)
    return [f for f in REQUIRED.get(name, ()) if f not in defined]


# Syntax Lua 5.1 refuses: token → what.
_NEWER = {
    "GOTO": "`goto` (Lua 5.2)",
    "CC": "a `::label::` (Lua 5.2)",
    "SS": "`//` integer division (Lua 5.3)",
    "AMP": "`&` (Lua 5.3 bitwise and)",
    "PIPE": "`|` (Lua 5.3 bitwise or)",
    "SQUIG": "`~` (Lua 5.3 bitwise xor/not)",
    "LL": "`<<` (Lua 5.3)",
    "GG": "`>>` (Lua 5.3)",
}


def newer_syntax(text: str) -> LuaSyntaxError | None:
    """The first construct of a parsed script that Lua 5.1 refuses to load (the grammar we
    parse with is Lua 5.4's), or None."""
    in_local_names = False  # between `local` and `=`: a `<` there is an attribute
    for token in _tokens(text):
        if token.kind in _NEWER:
            return LuaSyntaxError(token.line, token.column, _NEWER[token.kind])
        if token.kind == "LT" and in_local_names:
            return LuaSyntaxError(token.line, token.column, "a `<const>`/`<close>` (Lua 5.4)")
        if token.kind == "LOCAL":
            in_local_names = True
        elif token.kind not in ("NAME", "COMMA", "GT"):
            in_local_names = False
    return None
