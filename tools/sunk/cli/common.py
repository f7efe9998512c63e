"""What every sunkctl command shares: exit codes, error reporting, consoles."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from sunk.chartio.helm import HelmError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


HELM_HELP = "helm binary (default: $SUNK_HELM, then helm on PATH)."


def helm_option():
    return typer.Option(None, "--helm", help=HELM_HELP, metavar="PATH")


def fail(message: str, code: int) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(code)


def existing_files(paths: list[Path], flag: str = "-f") -> list[Path]:
    for path in paths:
        if not path.is_file():
            fail(f"{flag} {path}: no such file", EXIT_USAGE)
    return paths


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn library errors into one line and an exit code (never a traceback)."""
    try:
        yield
    except HelmError as exc:
        fail(str(exc), EXIT_ENV if exc.missing else EXIT_FINDINGS)
    except OSError as exc:
        fail(f"{exc.filename or ''}: {exc.strerror or exc}", EXIT_ENV)


def write_or_print(
    files: dict[str, str],
    out_dir: Path | None,
    only: str | None,
    echo: Callable[[str], None] = sys.stdout.write,
) -> None:
    if only is not None:
        if only not in files:
            fail(f"--file {only}: not rendered (available: {', '.join(sorted(files))})", EXIT_USAGE)
        files = {only: files[only]}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out_dir / name).write_text(text)
            err.print(f"wrote {out_dir / name}")
        return
    for name, text in files.items():
        if only is None:
            echo(f"### {name}\n")
        echo(text)
