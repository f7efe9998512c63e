"""What every sunkctl command shares: the error line, consoles, options.

Every error is one line on stderr, ``sunkctl <command>: error: <message>``, never a traceback.
Commands are :class:`SunkCommand`\\ s: its ``invoke`` takes the command path from the
command's own context (Typer runs commands in contexts of its own copy of Click, so a global
``click.get_current_context()`` does not see them) and is the one place errors become exits:
a :class:`~sunk.errors.SunkError` exits with its class's ``exit_code``, an ``OSError`` with 3,
anything else is a crash (3). Click's own usage errors (an unknown option, a bad ``-o`` value, a
missing one), raised while the arguments are parsed, get the same one line and exit 2.
"""

from __future__ import annotations

import os
import sys
import traceback as tb
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperCommand

from sunk.errors import EXIT_ENV, SunkError, UsageError

try:  # typer >= 0.2x runs its own copy of click; its exceptions derive from TyperException
    from typer import TyperException as _ClickError
except ImportError:  # pragma: no cover - older typer on click itself
    from click import ClickException as _ClickError

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

HELM_HELP = "helm binary (default: $SUNK_HELM, then helm on PATH)."
TRACEBACK_ENV = "SUNKCTL_TRACEBACK"  # set to 1: crashes show their traceback
_TRACEBACK = "sunk.traceback"  # ctx.meta key: this run asked for tracebacks (--traceback)


class Output(StrEnum):
    """``-o/--output`` of commands that print either text or one JSON document."""

    text = "text"
    json = "json"


def helm_option():
    return typer.Option(None, "--helm", help=HELM_HELP, metavar="PATH")


def one_line(message: str) -> str:
    """A message as one line: its non-blank lines joined with `` / ``."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return " / ".join(lines)


def error_line(message: str, command: str) -> str:
    return f"{command}: error: {one_line(message)}"


def want_traceback(ctx: typer.Context) -> None:
    """This run shows the traceback of a crash (``--traceback``)."""
    ctx.meta[_TRACEBACK] = True


def _exit_for(exc: Exception, ctx: typer.Context) -> tuple[str, int]:
    """The message and exit code of an error a command let escape."""
    if isinstance(exc, SunkError):
        return exc.message, exc.exit_code
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", EXIT_ENV
    # Anything else is a bug: one line, its traceback only when asked for.
    if ctx.meta.get(_TRACEBACK) or os.environ.get(TRACEBACK_ENV) == "1":
        typer.echo("".join(tb.format_exception(exc)).rstrip(), err=True)
    first = str(exc).splitlines()[0] if str(exc) else ""
    how = (
        "rerun with --traceback"
        if any(p.name == "traceback" for p in ctx.command.params)
        else f"{TRACEBACK_ENV}=1 shows the traceback"
    )
    return f"internal error: {type(exc).__name__}: {first} ({how})", EXIT_ENV


class SunkCommand(TyperCommand):
    """A sunkctl command: what escapes it becomes one line, ``sunkctl <command>: error: …``,
    and an exit code. Typer's and Click's own exits and usage errors pass through untouched."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _ClickError as exc:
            if getattr(exc, "exit_code", 2) != 2 or not hasattr(exc, "format_message"):
                raise
            path = " ".join(p for p in (getattr(parent, "command_path", ""), info_name) if p)
            typer.echo(error_line(f"{exc.format_message()} (see --help)", path), err=True)
            raise typer.Exit(2) from None

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _ClickError):
            raise
        except Exception as exc:
            message, code = _exit_for(exc, ctx)
            typer.echo(error_line(message, ctx.command_path), err=True)
            raise typer.Exit(code) from None


def existing_files(paths: list[Path], flag: str = "-f") -> list[Path]:
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{flag} {path}: no such file")
    return paths


def write_or_print(
    files: dict[str, str],
    out_dir: Path | None,
    only: str | None,
    echo: Callable[[str], None] | None = None,
) -> None:
    echo = echo or sys.stdout.write
    if only is not None:
        if only not in files:
            raise UsageError(f"--file {only}: not rendered (available: {', '.join(sorted(files))})")
        files = {only: files[only]}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out_dir / name).write_text(text)
            err.print(f"wrote {out_dir / name}", markup=False)
        return
    for name, text in files.items():
        if only is None:
            echo(f"### {name}\n")
        echo(text)
