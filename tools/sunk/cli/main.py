"""The ``sunkctl`` entry point.

Exit codes (shared by every command): 0 clean, 1 findings, 2 usage error,
3 tool or environment failure. Every error is one line, ``sunkctl <command>: error: …``
(see :mod:`sunk.cli.common`). Shell completion: ``sunkctl --install-completion``.
"""

from __future__ import annotations

import typer

from sunk import __version__
from sunk.cli.argocd_cmd import argocd_app
from sunk.cli.common import SunkCommand
from sunk.cli.demo_cmd import demo
from sunk.cli.dev_cmd import dev_app
from sunk.cli.migrate_cmd import migrate
from sunk.cli.render_cmd import EPILOG as RENDER_EPILOG
from sunk.cli.render_cmd import render
from sunk.cli.schema_cmd import schema
from sunk.cli.upgrade_check_cmd import EPILOG as UPGRADE_CHECK_EPILOG
from sunk.cli.upgrade_check_cmd import upgrade_check
from sunk.cli.validate_cmd import validate

EPILOG = "Exit codes: 0 clean, 1 findings, 2 usage error, 3 tool or environment failure."

app = typer.Typer(
    name="sunkctl",
    help="Open SUNK: validate, render and deploy Slurm-on-Kubernetes clusters.",
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(argocd_app, name="argocd")
app.add_typer(dev_app, name="dev")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sunkctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Open SUNK command line."""


app.command(cls=SunkCommand)(schema)
app.command(cls=SunkCommand, epilog=RENDER_EPILOG)(render)
app.command(cls=SunkCommand)(demo)
app.command(cls=SunkCommand)(validate)
app.command(cls=SunkCommand)(migrate)
app.command("upgrade-check", cls=SunkCommand, epilog=UPGRADE_CHECK_EPILOG)(upgrade_check)


def run() -> None:
    # The name is fixed, not taken from argv[0]: it starts every error line and names the
    # completion variable (_SUNKCTL_COMPLETE) the installed completion scripts call.
    app(prog_name="sunkctl")


if __name__ == "__main__":
    run()
