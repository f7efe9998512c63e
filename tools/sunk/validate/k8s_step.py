"""Step 5: every rendered object against a schema — built-in kinds strictly against the
Kubernetes schemas for the target version (the `kubernetes-validate` package's bundle), our
custom resources against schemas/ — with kubeconform when present, else in Python.

A kind without a schema is an error (kubeconform's semantics, not a silent pass).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import yaml

from sunk.errors import ToolError, UsageError
from sunk.resources import cache_dir, schemas_dir
from sunk.validate.findings import K8S, Finding, Severity

MISSING_HINT = (
    "check apiVersion/kind; give custom resources a schema with --crd-schemas DIR "
    "({group}/{kind}_{version}.json), or pass --ignore-missing-schemas"
)
CRD_FILE = "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
_SEGMENT = re.compile(r"- at '([^']*)': (.*?)(?= - at '|$)")


def bundle_dir() -> Path:
    try:
        import kubernetes_validate
    except ImportError as exc:
        raise ToolError(
            "the kubernetes-validate package (Kubernetes schema bundle) is not installed"
        ) from exc
    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"


def bundle_version() -> str:
    import kubernetes_validate

    return str(getattr(kubernetes_validate, "__version__", "unknown"))


def available_versions() -> list[str]:
    names = [p.name for p in bundle_dir().glob("v*-local-strict")]
    versions = {n[1:].split("-")[0].rsplit(".", 1)[0] for n in names}
    return sorted(versions, key=lambda v: tuple(int(x) for x in v.split(".")))


def normalize_version(version: str | None) -> str:
    """`1.33`, `v1.33`, `1.33.4` → `1.33`; default: the newest in the bundle."""
    versions = available_versions()
    if not versions:
        raise ToolError(f"no Kubernetes schemas found in {bundle_dir()}")
    if not version:
        return versions[-1]
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", version.strip())
    if not match:
        raise UsageError(f"--kube-version {version!r}: expected X.Y (e.g. 1.33)")
    wanted = f"{match.group(1)}.{match.group(2)}"
    if wanted not in versions:
        raise UsageError(
            f"--kube-version {version}: no schemas for it (bundled: {versions[0]}–{versions[-1]})"
        )
    return wanted


def kind_file(kind: str, api_version: str) -> str:
    """kubeconform's `{{ .ResourceKind }}{{ .KindSuffix }}.json` (the bundle's file names)."""
    group_parts = api_version.split("/")
    suffix = "-" + group_parts[0].split(".")[0].lower()
    if len(group_parts) > 1:
        suffix += "-" + group_parts[1].lower()
    return f"{kind.lower()}{suffix}.json"


def schema_dirs(extra: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """Custom resource schema directories in kubeconform's {group}/{kind}_{version}.json
    layout: the user's (--crd-schemas) first, then ours."""
    return (*extra, schemas_dir())  # not found: a ResourceError, a ToolError


def crd_schema_file(kind: str, api_version: str, dirs: tuple[Path, ...] = ()) -> Path | None:
    if "/" not in api_version:
        return None
    group, version = api_version.split("/", 1)
    for root in schema_dirs(dirs):
        path = root / group / f"{kind.lower()}_{version}.json"
        if path.is_file():
            return path
    return None


def resource_of(obj: dict[str, Any]) -> dict[str, str]:
    """apiVersion, kind, name (and namespace) of a rendered object, for a finding."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    out = {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "name": str(meta.get("name", "")),
    }
    if meta.get("namespace"):
        out["namespace"] = str(meta["namespace"])
    return out


def _dotted_pointer(pointer: str) -> str:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/") if p]
    from sunk.validate.paths import dotted

    return dotted(int(p) if p.isdigit() else p for p in parts)


def _finding(obj_res: dict[str, str], pointer: str, message: str, display: str) -> Finding:
    return object_finding(obj_res, _dotted_pointer(pointer), message, display)


def object_finding(obj_res: dict[str, str], key: str, message: str, display: str) -> Finding:
    """A K8S error about field ``key`` (dotted) of a rendered object."""
    where = f" {key}:" if key else ":"
    return Finding(
        K8S,
        Severity.ERROR,
        f"{obj_res['kind']}/{obj_res['name']}{where} {message}",
        display,
        key_path=key or None,
        resource=obj_res,
        hint=None,
    )


# --------------------------------------------------------------------------- kubeconform


def kubeconform_binary() -> str | None:
    if os.environ.get("SUNKCTL_NO_KUBECONFORM"):
        return None
    for candidate in (
        os.environ.get("SUNKCTL_KUBECONFORM"),
        shutil.which("kubeconform"),
    ):
        if candidate and Path(candidate).exists():
            return str(candidate)
    return None


def materialized(version: str) -> Path:
    """A cache copy of the bundle for `version` whose $refs kubeconform can resolve (absolute
    file URLs, an explicit 2020-12 dialect); filled per kind on demand."""
    root = cache_dir() / "k8s-schemas" / f"kubernetes-validate-{bundle_version()}"
    target = root / f"v{version}.0-local-strict"
    target.mkdir(parents=True, exist_ok=True)
    return root


def _prepare(root: Path, version: str, files: set[str]) -> None:
    source = bundle_dir() / f"v{version}.0-local-strict"
    target = root / f"v{version}.0-local-strict"
    definitions = target / "_definitions.json"
    url = definitions.resolve().as_uri()
    for name in sorted({"_definitions.json", *files}):
        dest = target / name
        if dest.exists() or not (source / name).exists():
            continue
        text = (source / name).read_text().replace('"/api/_definitions.json', f'"{url}')
        doc = json.loads(text)
        doc.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc))
        tmp.replace(dest)


@dataclass(frozen=True)
class Batch:
    """One file's rendered objects, and the YAML stream helm printed for them."""

    objects: list[dict[str, Any]]
    display: str
    text: str | None = None

    @cached_property
    def by_key(self) -> dict[tuple[Any, str], dict[str, Any]]:
        """The objects by (kind, name), as kubeconform names a resource: built once per file,
        not once per resource it reports."""
        return {
            (o.get("kind"), str((o.get("metadata") or {}).get("name"))): o for o in self.objects
        }


def run_kubeconform(
    binary: str, batches: list[Batch], version: str, dirs: tuple[Path, ...] = ()
) -> list[list[Finding]]:
    """Every batch in one kubeconform run (its start-up and schema loading once, not per file):
    each batch is a file of its own, and kubeconform names the file of every resource."""
    root = materialized(version)
    _prepare(
        root,
        version,
        {
            kind_file(str(o.get("kind")), str(o.get("apiVersion")))
            for b in batches
            for o in b.objects
        },
    )
    with tempfile.TemporaryDirectory(prefix="sunkctl-k8s-") as tmp:
        files = []
        for i, batch in enumerate(batches):
            path = Path(tmp) / f"{i:06d}.yaml"
            text = batch.text
            path.write_text(
                text if text is not None else yaml.safe_dump_all(batch.objects, sort_keys=False)
            )
            files.append(str(path))
        cmd = [
            binary,
            "-strict",
            "-summary",
            "-output",
            "json",
            "-kubernetes-version",
            f"{version}.0",
            *[
                a
                for d in schema_dirs(dirs)
                for a in ("-schema-location", str(d / "{{ .Group }}" / CRD_FILE))
            ],
            "-schema-location",
            str(
                root
                / "{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}"
                / "{{ .ResourceKind }}{{ .KindSuffix }}.json"
            ),
            *files,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"kubeconform gave no JSON report (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[:300]}"
        ) from exc
    index = {f: i for i, f in enumerate(files)}
    out: list[list[Finding]] = [[] for _ in batches]
    for item in report.get("resources") or []:
        status = item.get("status", "")
        if status in ("statusValid", "statusSkipped", "VALID", "SKIPPED"):
            continue
        i = index.get(str(item.get("filename")))
        if i is None:
            raise ToolError(f"kubeconform reported a file it was not given: {item.get('filename')}")
        out[i] += _kubeconform_findings(item, batches[i], version)
    return out


def _kubeconform_findings(item: dict[str, Any], batch: Batch, version: str) -> list[Finding]:
    obj = batch.by_key.get((item.get("kind"), str(item.get("name"))), {})
    res = (
        resource_of(obj)
        if obj
        else {
            "apiVersion": str(item.get("version", "")),
            "kind": str(item.get("kind", "")),
            "name": str(item.get("name", "")),
        }
    )
    display = batch.display
    msg = str(item.get("msg", ""))
    segments = _SEGMENT.findall(msg)
    if segments:
        return [_finding(res, p, m.strip(), display) for p, m in segments]
    if "could not find schema" in msg:
        return [_missing(res, version, display)]
    errors = item.get("validationErrors") or []
    if errors:
        return [_finding(res, e.get("path", ""), e.get("msg", ""), display) for e in errors]
    return [_finding(res, "", msg, display)]


def _missing(res: dict[str, str], version: str, display: str) -> Finding:
    return Finding(
        K8S,
        Severity.ERROR,
        f"{res['kind']}/{res['name']}: no schema for {res['apiVersion']} {res['kind']} in "
        f"Kubernetes {version}",
        display,
        resource=res,
        hint=MISSING_HINT,
    )


# --------------------------------------------------------------------------- Python fallback


@cache
def _definitions_registry(version: str) -> Any:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    defs = json.loads(
        (bundle_dir() / f"v{version}.0-local-strict" / "_definitions.json").read_text()
    )
    resource = Resource.from_contents(defs, default_specification=DRAFT202012)
    return Registry().with_resource("/api/_definitions.json", resource)


@cache
def _validator(kind: str, api_version: str, version: str, dirs: tuple[Path, ...] = ()) -> Any:
    from jsonschema import Draft7Validator, Draft202012Validator

    crd = crd_schema_file(kind, api_version, dirs)
    if crd is not None:
        return Draft7Validator(json.loads(crd.read_text()))
    path = bundle_dir() / f"v{version}.0-local-strict" / kind_file(kind, api_version)
    if not path.is_file():
        return None
    return Draft202012Validator(
        json.loads(path.read_text()), registry=_definitions_registry(version)
    )


def run_python(
    objects: list[dict[str, Any]], version: str, display: str, dirs: tuple[Path, ...] = ()
) -> list[Finding]:
    findings = []
    for obj in objects:
        res = resource_of(obj)
        validator = _validator(res["kind"], res["apiVersion"], version, dirs)
        if validator is None:
            findings.append(_missing(res, version, display))
            continue
        for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path))):
            pointer = "/" + "/".join(str(p) for p in error.absolute_path)
            findings.append(_finding(res, pointer, error.message, display))
    return findings


def check_batches(
    batches: list[Batch],
    version: str,
    dirs: tuple[Path, ...] = (),
    ignore_missing: bool = False,
) -> list[list[Finding]]:
    """Each batch's findings, in the batches' order."""
    if not batches:
        return []
    bundle_dir()  # raises ToolError when the bundle is missing
    binary = kubeconform_binary()
    if binary:
        found = run_kubeconform(binary, batches, version, dirs)
    else:
        found = [run_python(b.objects, version, b.display, dirs) for b in batches]
    if ignore_missing:
        found = [[f for f in fs if f.hint != MISSING_HINT] for fs in found]
    return found
