"""What every sunkctl command shares: exit codes, the error line, consoles.

Every error is one line on stderr, ``sunkctl <command>: error: <message>``, never a traceback.
Commands are :class:`SunkCommand`\\ s: its ``invoke`` records the command path (Typer runs
commands in its own contexts, so the path is taken from the command's context, not looked up
later) and turns what escapes the command into that line and an exit code. Click's own usage
errors (an unknown option, a bad ``-o`` value) keep Click's format and exit 2.
"""

from __future__ import annotations

import os
import sys
import traceback as tb
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from typer.core import TyperCommand

from sunk.chartio.helm import HelmError

try:  # typer >= 0.2x runs its own copy of click; its exceptions derive from TyperException
    from typer import TyperException as _ClickError
except ImportError:  # pragma: no cover - older typer on click itself
    from click import ClickException as _ClickError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

HELM_HELP = "helm binary (default: $SUNK_HELM, then helm on PATH)."
TRACEBACK_ENV = "SUNKCTL_TRACEBACK"  # set to 1: crashes show their traceback
_TRACEBACK = "sunk.traceback"  # ctx.meta key: this run asked for tracebacks (--traceback)

# The command being run ("sunkctl validate"), recorded when it starts.
_command: list[str] = ["sunkctl"]


class Output(StrEnum):
    """``-o/--output`` of commands that print either text or one JSON document."""

    text = "text"
    json = "json"


class CommandError(Exception):
    """An error a command reports as its one line, with the exit code it ends with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def helm_option():
    return typer.Option(None, "--helm", help=HELM_HELP, metavar="PATH")


def enter_command(ctx: typer.Context) -> str:
    """Record the running command's path (``sunkctl argocd gen``) for its error line."""
    _command[0] = ctx.command_path
    return _command[0]


def current_command() -> str:
    return _command[0]


def one_line(message: str) -> str:
    """A message as one line: its non-blank lines joined with `` / ``."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return " / ".join(lines)


def error_line(message: str, command: str | None = None) -> str:
    return f"{command or current_command()}: error: {one_line(message)}"


def fail(message: str, code: int) -> NoReturn:
    """End the command with ``message`` as its error line and exit ``code``."""
    raise CommandError(message, code)


def want_traceback(ctx: typer.Context) -> None:
    """This run shows the traceback of a crash (``--traceback``)."""
    ctx.meta[_TRACEBACK] = True


def _exit_for(exc: BaseException) -> tuple[str, int] | None:
    """The message and exit code of an error a command let escape (None: not ours to map)."""
    if isinstance(exc, CommandError):
        return exc.message, exc.exit_code
    if isinstance(exc, HelmError):  # helm missing or failing: a tool failure
        return str(exc), EXIT_ENV
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", EXIT_ENV
    return None


class SunkCommand(TyperCommand):
    """A sunkctl command: records its path and maps what escapes it to one line and an exit.

    Typer's and Click's own exits and usage errors pass through untouched."""

    def invoke(self, ctx: typer.Context) -> Any:
        command = enter_command(ctx)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _ClickError):
            raise
        except Exception as exc:
            mapped = _exit_for(exc)
            if mapped is None:
                if ctx.meta.get(_TRACEBACK) or os.environ.get(TRACEBACK_ENV) == "1":
                    typer.echo("".join(tb.format_exception(exc)).rstrip(), err=True)
                first = str(exc).splitlines()[0] if str(exc) else ""
                how = (
                    "rerun with --traceback"
                    if any(p.name == "traceback" for p in self.params)
                    else f"{TRACEBACK_ENV}=1 shows the traceback"
                )
                mapped = f"internal error: {type(exc).__name__}: {first} ({how})", EXIT_ENV
            message, code = mapped
            typer.echo(error_line(message, command), err=True)
            raise typer.Exit(code) from None


def existing_files(paths: list[Path], flag: str = "-f") -> list[Path]:
    for path in paths:
        if not path.is_file():
            fail(f"{flag} {path}: no such file", EXIT_USAGE)
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
            fail(f"--file {only}: not rendered (available: {', '.join(sorted(files))})", EXIT_USAGE)
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
