"""The host's Debian archive, read from its apt sources (never hard-coded): the Slurm test
root and the image base are debootstrapped from the same mirror the host uses."""

from __future__ import annotations

import os
import re
from pathlib import Path

DEBIAN_SUITE = re.compile(
    r"^(stable|testing|unstable|sid|trixie|bookworm|bullseye|buster|forky|duke)$"
)
APT = Path("/etc/apt")


class NoMirrorError(RuntimeError):
    pass


def apt_source_files(etc: Path = APT) -> list[Path]:
    files = [etc / "sources.list"]
    parts = etc / "sources.list.d"
    if parts.is_dir():
        files += sorted(parts.glob("*.list")) + sorted(parts.glob("*.sources"))
    return [f for f in files if f.is_file()]


def apt_sources(files: list[Path]) -> list[tuple[str, list[str], list[str]]]:
    """(uri, suites, components) of every binary source in these apt sources files."""
    out: list[tuple[str, list[str], list[str]]] = []
    for path in files:
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if not line.startswith("#") and ":" in line:
                        key, _, value = line.partition(":")
                        fields[key.strip().lower()] = value.strip()
                if "deb" in fields.get("types", "").split():
                    suites = fields.get("suites", "").split()
                    comps = fields.get("components", "").split()
                    out += [(uri, suites, comps) for uri in fields.get("uris", "").split()]
            continue
        for raw in text.splitlines():
            words = [w for w in raw.split("#", 1)[0].split() if not w.startswith("[")]
            if len(words) >= 3 and words[0] == "deb":
                out.append((words[1], [words[2]], words[3:]))
    return out


def debian_mirror(etc: Path = APT) -> str:
    """The Debian archive the host's apt uses (``$SUNK_DEBIAN_MIRROR`` overrides it)."""
    env = os.environ.get("SUNK_DEBIAN_MIRROR")
    if env:
        return env
    for uri, suites, components in apt_sources(apt_source_files(etc)):
        if "main" in components and any(DEBIAN_SUITE.match(s) for s in suites):
            return uri
    raise NoMirrorError(
        f"no Debian mirror in {etc}/sources.list(.d) (a 'deb' source of a Debian suite with "
        "component main); set SUNK_DEBIAN_MIRROR"
    )
