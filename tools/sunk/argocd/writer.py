"""Deterministic YAML output for a :class:`~sunk.argocd.builders.Bundle`.

Same bundle, same bytes: keys keep the builders' order, multi-line strings (Lua) are literal
blocks, sequences are indented, nothing depends on time or environment. Files this tool wrote
before and no longer produces (a removed Slurm cluster) are pruned, but only files that carry
the generated-file marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sunk.argocd.builders import GENERATED_MARKER, Bundle, OutputFile
from sunk.argocd.errors import ArgoCDOutputError

HEADER = GENERATED_MARKER + ": edit its inputs and re-generate; do not edit by hand."


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_doc(doc: dict[str, Any]) -> str:
    return yaml.dump(
        doc,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100_000,
        indent=2,
    )


def render_file(f: OutputFile) -> str:
    lines = [HEADER, *(f"# {c}".rstrip() for c in f.comment)]
    body = "---\n".join(dump_doc(d) for d in f.docs)
    return "\n".join(lines) + "\n" + body


def render(bundle: Bundle) -> dict[str, str]:
    """Output path (relative, POSIX) -> file content, in bundle order."""
    return {f.path: render_file(f) for f in bundle.files}


@dataclass(frozen=True)
class WriteResult:
    written: tuple[str, ...]  # created or changed
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]  # stale generated files


def _stale(out_dir: Path, wanted: dict[str, str]) -> list[str]:
    stale = []
    for sub in ("", "apps"):
        folder = out_dir / sub if sub else out_dir
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.yaml")):
            rel = path.relative_to(out_dir).as_posix()
            if rel in wanted:
                continue
            try:
                first = path.read_text(encoding="utf-8").split("\n", 1)[0]
            except (OSError, UnicodeDecodeError):
                continue
            if first.startswith(GENERATED_MARKER):
                stale.append(rel)
    return stale


def plan(out_dir: Path, files: dict[str, str]) -> WriteResult:
    """What :func:`write` would do, without touching the disk (``--check``)."""
    written, unchanged = [], []
    for rel, content in files.items():
        path = out_dir / rel
        try:
            same = path.is_file() and path.read_bytes() == content.encode("utf-8")
        except OSError:
            same = False
        (unchanged if same else written).append(rel)
    return WriteResult(tuple(written), tuple(unchanged), tuple(_stale(out_dir, files)))


def write(out_dir: Path, files: dict[str, str]) -> WriteResult:
    result = plan(out_dir, files)
    try:
        for rel in result.written:
            path = out_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(files[rel].encode("utf-8"))
        for rel in result.removed:
            (out_dir / rel).unlink()
    except OSError as exc:
        raise ArgoCDOutputError(f"--out: cannot write {out_dir}: {exc}") from None
    return result
