"""What each Slurm release's own parser takes, read offline from the debootstrapped roots
(``make setup``): its slurm.conf keys, its partition-line keys and its plugins. The result is
``sunk/slurmconf/slurm_options.json``, which `sunkctl validate` reads
(:mod:`sunk.slurmconf.release_options`); the slurm tier regenerates it and fails on any
difference, so the file cannot drift from the parsers.

How: every name the release's libslurm holds as a string (its option tables are string
literals) is written as ``Name=1`` into one slurm.conf, and as ``Name=1`` on its own partition
line; every Slurm command parses the whole file before it stops, logging ``Parsing error at
unrecognized key: Name`` for each name it does not know, so one `scontrol` run per table
sorts every candidate. A sentinel name no release knows comes last and must be reported, which
proves the parse reached the end. Plugins are the release's ``<type>_<name>.so`` files.

    python -m sunk.devenv.slurm_options          # rewrite the file from the installed roots
    python -m sunk.devenv.slurm_options --check  # exit 1 when the file differs
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sunk.devenv import slurm_rootfs
from sunk.slurmconf import release_options

# The words that end C string literals (keys are whole literals, or the tails of longer ones).
_CANDIDATE = re.compile(rb"[A-Za-z0-9]{3,64}(?=\x00)")
_UNRECOGNIZED = re.compile(r"unrecognized key: ([A-Za-z0-9]+)")
SENTINEL = "SunkNoSuchOption"
# The lines every config needs, and keys that start lines of their own rather than take a value.
BASE = "ClusterName=t\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
LINE_KEYS = {"clustername", "slurmctldhost", "nodename", "partitionname", "nodes", "include"}
# BASE's own keys, which every probe's parser took.
BASE_KEYS = {
    "slurm.conf": ["ClusterName", "SlurmctldHost"],
    "partition": ["PartitionName", "Nodes"],
}
# One mount namespace, the root's /tmp bound to the config's directory.
PARSE = """
mount --bind "$1" "$2/tmp" || exit 1
chroot "$2" env SLURM_CONF=/tmp/slurm.conf scontrol show hostnames n1 > "$1/out" 2>&1 || :
"""
_FATAL = re.compile(r"fatal: (.*)")
_UNKNOWN_KEYS_FATAL = "Unable to process configuration file"
_REMOVED = re.compile(rb"[\x20-\x7e]*has been removed[\x20-\x7e]*")
MAX_FATAL = 40


class SlurmOptionsError(RuntimeError):
    """A root could not be read, or its parser did not read the whole file."""


def _library_dir(root: Path) -> Path:
    found = sorted(root.glob("usr/lib/*/slurm-wlm/libslurmfull*.so"))
    if not found:
        raise SlurmOptionsError(f"{root}: no libslurmfull under usr/lib/*/slurm-wlm")
    return found[0].parent


def candidates(library: Path) -> list[str]:
    """One spelling per case-insensitive name the library holds (Slurm reads keys in any
    case): the option tables' CamelCase before an all-capitals one, then in ASCII order. The
    linker stores a string that ends another only once, inside it (``Prolog`` within
    ``SrunProlog``), so each string's suffixes from a capital letter are candidates too."""
    spellings: dict[str, str] = {}
    found: set[str] = set()
    for match in _CANDIDATE.findall(library.read_bytes()):
        text = match.decode()
        found |= {text[i:] for i in range(len(text) - 2) if text[i].isupper()}
    for name in sorted(found, key=lambda s: (s.isupper(), s)):
        spellings.setdefault(name.lower(), name)
    return [name for low, name in sorted(spellings.items()) if low not in LINE_KEYS]


def _parse(root: Path, conf: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "slurm.conf").write_text(conf)
        subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", PARSE, "sh", tmp,
             str(root)],
            check=True, timeout=600, capture_output=True,
        )  # fmt: skip
        return Path(tmp, "out").read_text()


def probe(root: Path, names: list[str], line: Callable[[int, str], str], table: str) -> list[str]:
    """The ``names`` the root's parser takes, each written by ``line`` (index, name). A key it
    stops on is one it refuses (a removed option: "SallocDefaultCommand has been removed";
    ``FrontendName`` without front-end support): it is left out, and the probe runs again."""
    left = list(names)
    for _ in range(MAX_FATAL):
        probe_names = [*left, SENTINEL]
        output = _parse(root, BASE + "".join(line(i, n) for i, n in enumerate(probe_names)))
        unknown = {name.lower() for name in _UNRECOGNIZED.findall(output)}
        refusal = next((m for m in _FATAL.findall(output) if m != _UNKNOWN_KEYS_FATAL), None)
        reached = SENTINEL.lower() in unknown
        if reached and refusal is None:
            return [n for n in left if n.lower() not in unknown]
        # The key refused follows the last one reported (all of them, when the check comes
        # after the parse, as "AccountingStorageLoc ... has been removed" does), and the
        # message names it.
        after = max((i + 1 for i, n in enumerate(left) if n.lower() in unknown), default=0)
        named = [
            n
            for n in (left if reached else left[after:])
            if refusal and n.lower() not in unknown and re.search(rf"\b{n}\b", refusal)
        ]
        if not named:
            raise SlurmOptionsError(
                f"{root}: Slurm's parser stopped before the end of the {table} probe:\n"
                + "\n".join(output.splitlines()[-5:])
            )
        left.remove(named[0])
    raise SlurmOptionsError(f"{root}: over {MAX_FATAL} refused keys in the {table} probe")


def refused_alone(root: Path, library: Path, known: list[str], line: Callable[[int, str], str]):
    """The ``known`` keys the parser takes but Slurm then refuses as removed ("The
    AccountingStorageLoc option has been removed"), a check that runs only once the whole file
    parsed: each key a "has been removed" message names is tried alone."""
    texts = [m.decode("latin-1") for m in _REMOVED.findall(library.read_bytes())]
    named = {w.lower() for text in texts for w in re.findall(r"[A-Za-z0-9]+", text)}
    refused = []
    for name in (k for k in known if k.lower() in named):
        if _FATAL.search(_parse(root, BASE + line(0, name))):
            refused.append(name)
    return refused


def read_release(root: Path) -> dict[str, list[str]]:
    """{"slurm.conf": keys, "partition": keys, "plugins": plugin names} of the root's Slurm."""
    library_dir = _library_dir(root)
    library = library_dir / "libslurmfull.so"
    names = candidates(library)
    tables = {}
    lines: dict[str, Callable[[int, str], str]] = {
        "slurm.conf": lambda _, name: f"{name}=1\n",
        "partition": lambda i, name: f"PartitionName=probe{i} Nodes=n1 {name}=1\n",
    }
    for table, line in lines.items():
        known = probe(root, names, line, table)
        refused = set(refused_alone(root, library, known, line))
        tables[table] = sorted(
            BASE_KEYS[table] + [k for k in known if k not in refused], key=str.lower
        )
    return {
        **tables,
        "plugins": sorted(p.stem for p in library_dir.glob("*.so") if not p.name.startswith("lib")),
    }


def generate() -> dict[str, dict[str, list[str]]]:
    """Every release in ``slurm_rootfs.RELEASES``, each from its installed root."""
    releases = {}
    for series, release in sorted(slurm_rootfs.RELEASES.items()):
        built = slurm_rootfs.installed(release.suite)
        if built is None:
            raise SlurmOptionsError(
                f"no Slurm {series} root ({release.suite}); run `make setup` as root first"
            )
        releases[series] = read_release(built.root)
    return releases


def render(releases: dict[str, dict[str, list[str]]]) -> str:
    return json.dumps(releases, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sunk.devenv.slurm_options")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    args = parser.parse_args(argv)
    try:
        text = render(generate())
    except (SlurmOptionsError, OSError, subprocess.SubprocessError) as exc:
        print(f"slurm_options: {exc}", file=sys.stderr)
        return 2
    path = release_options.DATA
    if args.check:
        if path.read_text() != text:
            print(f"{path} differs from what the Slurm roots' parsers take; regenerate it with "
                  "`python -m sunk.devenv.slurm_options`", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
