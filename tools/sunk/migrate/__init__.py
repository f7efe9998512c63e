"""`sunkctl migrate`: a SUNK 7.x `slurm` chart values file → values for our `slurm` chart.

`migrate_file` reads the file as `sunkctl validate` reads values (positions, duplicate keys),
walks every key through `decisions.table()`, and returns the new values with one note per
decision; `check_output` runs the result through `sunkctl validate`'s own pipeline (schema and
rules). Nothing here prints.
"""

from __future__ import annotations

import tempfile
from pathlib import Path as FilePath
from typing import Any

import yaml

from sunk.migrate import sections
from sunk.migrate.context import Action, Level, Migration, Note, Result
from sunk.migrate.decisions import login_service, walk
from sunk.validate import Finding, Options, validate
from sunk.validate.yamlload import load_file

__all__ = ["Action", "Level", "Note", "Result", "check_output", "dump", "migrate_file"]

REUSE_VALUES = (
    "Do not run `helm upgrade --reuse-values` from the 7.x release (SUNK 8.0's release note): "
    "it carries your 7.x values forward without the new chart defaults, which can silently "
    "select the wrong database backend. Install with these values (-f), and nothing else"
)
VALUES_ONLY = (
    "values only: nothing here moves slurmctld's state or the accounting data of the 7.x release"
)


def migrate_file(path: str, display: str) -> Result:
    """The migration of one 7.x values file; `Result.errors` lists what cannot be carried."""
    doc, findings = load_file(path, display)
    if findings or doc is None:
        notes = [_yaml_note(f) for f in findings]
        return Result({}, notes or [Note(Action.FAILED, Level.ERROR, "", "not YAML")])
    if not isinstance(doc.data, dict):
        what = "a list" if isinstance(doc.data, list) else "a single value"
        message = f"a values file must be a map at the top level, not {what}"
        return Result({}, [Note(Action.FAILED, Level.ERROR, "", message, 1, 1)])
    if doc.documents > 1:
        message = f"{doc.documents} YAML documents in a values file; Helm reads one"
        return Result({}, [Note(Action.FAILED, Level.ERROR, "", message, 1, 1)])
    m = Migration(doc)
    m.notes.append(Note(Action.NOTICE, Level.WARNING, "", REUSE_VALUES))
    for key in sorted(doc.data, key=str):
        walk(m, (key,), doc.data[key], (key,))
    sections.database_backend(m)
    login_service(m)
    m.notes.append(Note(Action.NOTICE, Level.NOTE, "", VALUES_ONLY))
    return Result(m.out, m.notes, m.origin)


def _yaml_note(finding: Finding) -> Note:
    path = finding.key_path or ""
    return Note(
        Action.FAILED,
        Level.ERROR,
        path,
        finding.message,
        finding.line,
        finding.column,
        finding.hint,
    )


class _Literal(yaml.SafeDumper):
    """Multi-line text (scripts, extraConfig) as `|` blocks, the way people write them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Literal.add_representer(str, _text)


def dump(values: dict[str, Any], source: str) -> str:
    """The migrated values as YAML, keys sorted: the same input gives the same bytes."""
    body = yaml.dump(
        values, Dumper=_Literal, sort_keys=True, default_flow_style=False, allow_unicode=True
    )
    header = f"# Migrated by `sunkctl migrate` from {source} (SUNK 7.x slurm chart values).\n"
    return header + (body if values else "{}\n")


def check_output(text: str) -> list[Finding]:
    """`sunkctl validate`'s schema and rule steps over the migrated values (no helm)."""
    with tempfile.TemporaryDirectory(prefix="sunk-migrate-") as tmp:
        path = FilePath(tmp) / "values.yaml"
        path.write_text(text)
        report = validate(Options(paths=[str(path)], chart="slurm", render=False, jobs=1))
    return report.findings
