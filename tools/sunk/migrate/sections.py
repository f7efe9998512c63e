"""The 7.x keys whose decision depends on their value: Slurm settings, node groups and
partitions, the database backends, the directory. Each is a handler of
`sunk.migrate.decisions.table()`."""

from __future__ import annotations

import re
from typing import Any

from sunk.migrate import decisions
from sunk.migrate.context import Action, Level, Migration, Path, kind
from sunk.models.stock import STOCK_DEFINITIONS
from sunk.models.values import DirectoryService
from sunk.slurmconf import slurmdbd
from sunk.slurmconf.guard import owned
from sunk.slurmconf.slurm_conf import OWNED_KEYS
from sunk.validate.rules.slurm_settings import slurm_conf_keys

# --------------------------------------------------------------------------- slurmConfig

# 7.x's structured keys and the slurm.conf keys they wrote.
SLURM_CONFIG_KEYS = {
    "inactiveLimit": "InactiveLimit",
    "waitTime": "WaitTime",
    "selectTypeParameters": "SelectTypeParameters",
    "defMemPerCPU": "DefMemPerCPU",
}
SLURMCTLD_KEYS = {"timeout": "SlurmctldTimeout", "additionalParameters": "SlurmctldParameters"}
SLURMD_KEYS = {"timeout": "SlurmdTimeout"}
# Keys of this chart's slurmConfig that are not slurm.conf keys (carried as they are).
OUR_SLURM_CONFIG = ("extraConfig", "mpiConfig", "jobSubmitLua", "cliFilterLua")
SLURM_CONFIG = ("slurmConfig",)
KILL_WAIT = ("scheduler", "killWait")
KILL_WAIT_RANGE = (6, 65535)  # sunk.models.values.Scheduler.killWait


def slurm_config(m: Migration, src: Path, value: Any, dst: Path) -> None:
    body = m.mapping(src, value)
    for key in sorted(body or {}):
        path, item = (*src, key), body[key]
        if key in OUR_SLURM_CONFIG:
            m.put(path, (*dst, key), item)
        elif key == "cgroupConfig":
            _cgroup_config(m, path, item, (*dst, key))
        elif key == "killWait":
            _kill_wait(m, path, item)
        elif key == "slurmCtld":
            _daemon(m, path, item, SLURMCTLD_KEYS)
        elif key == "slurmd":
            _daemon(m, path, item, SLURMD_KEYS)
        else:
            slurm_key(m, path, item, SLURM_CONFIG_KEYS.get(key))


def slurm_key(m: Migration, src: Path, value: Any, canonical: str | None = None) -> None:
    """One slurm.conf setting: under its canonical spelling in slurmConfig, unless the
    operator owns it or Slurm does not know it."""
    key = str(src[-1])
    if value is None:
        m.drop(src, "null: Slurm's default")
        return
    if isinstance(value, dict):
        m.fail(src, "expected a slurm.conf value (text, number or list), not a map")
        return
    name = canonical or slurm_conf_keys().get(key.lower())
    if name is None:
        m.fail(
            src,
            f"`{key}` is not a slurm.conf key (Slurm 24.11) or a 7.x key this migration knows",
            "free text goes into slurmConfig.extraConfig",
        )
        return
    if owned(name, OWNED_KEYS):
        m.drop(src, f"{name} is managed by the operator here", Level.WARNING)
        return
    target = (*SLURM_CONFIG, name)
    if src == target:
        m.put(src, target, value)
    else:
        m.rename(src, target, value)


def _daemon(m: Migration, src: Path, value: Any, renames: dict[str, str]) -> None:
    """`slurmConfig.slurmCtld` / `slurmConfig.slurmd`: slurm.conf keys in 7.x's spelling,
    and ConfigMaps of files that cannot be carried."""
    body = m.mapping(src, value)
    for key in sorted(body or {}):
        path, item = (*src, key), body[key]
        if key in ("prologConfigMap", "epilogConfigMap"):
            which = key.removesuffix("ConfigMap")
            _config_map(m, path, item, f"copy its scripts into {which}Scripts (name → script)")
        elif key == "etcConfigMap":
            _config_map(
                m, path, item, "move Lua scripts into slurmConfig.jobSubmitLua/cliFilterLua"
            )
        elif key.lower() == "jobsubmitplugins" and "lua" in str(item or "").split(","):
            m.fail(
                path,
                "job_submit/lua's script lived in a ConfigMap this chart does not mount",
                "put the script into slurmConfig.jobSubmitLua (JobSubmitPlugins=lua is then "
                "set for you) and remove `lua` here",
            )
        else:
            slurm_key(m, path, item, renames.get(key))


def _config_map(m: Migration, src: Path, value: Any, hint: str) -> None:
    if value in (None, ""):
        m.drop(src, "empty; nothing to carry")
    else:
        m.fail(
            src,
            f"ConfigMap {value!r}: its files would be lost (this chart does not mount it)",
            hint,
        )


def _kill_wait(m: Migration, src: Path, value: Any) -> None:
    if value is None:
        m.drop(src, "null: the default (30)")
        return
    low, high = KILL_WAIT_RANGE
    number = int(value) if isinstance(value, str) and value.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        m.fail(src, f"KillWait {value!r}: scheduler.killWait takes {low} to {high} seconds")
        return
    m.rename(src, KILL_WAIT, number, "one KillWait for slurm.conf and the Pod Scheduler")


def _cgroup_config(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if value is None:
        m.drop(src, "null: this chart's cgroup.conf defaults")
    elif isinstance(value, dict):
        for key in sorted(value):
            if isinstance(value[key], dict):
                m.fail((*src, key), "expected a cgroup.conf value, not a map")
            elif value[key] is not None:
                m.put((*src, key), (*dst, key), value[key])
    elif isinstance(value, str):
        parsed = _key_value_lines(m, src, value)
        if parsed is not None:
            for key, item in parsed.items():
                m.put(src, (*dst, key), item)
            m.note(Action.RENAMED, Level.NOTE, src, "cgroup.conf text → a map of its keys")
    else:
        m.fail(src, f"expected a map (or cgroup.conf text), not {kind(value)}")


def _key_value_lines(m: Migration, src: Path, text: str) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, item = (part.strip() for part in line.partition("="))
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
            m.fail(src, f"line {number} of the text, `{raw.strip()}`: not Key=Value")
            return None
        out[key] = _scalar(item)
    return out


def _scalar(text: str) -> str | int:
    return int(text) if text.isdigit() else text


# --------------------------------------------------------------------------- accounting


def dbd_config(m: Migration, src: Path, value: Any, dst: Path) -> None:
    body = m.mapping(src, value)
    for key in sorted(body or {}):
        path = (*src, key)
        if body[key] is None:
            m.drop(path, "null: slurmdbd's default")
        elif owned(key, slurmdbd.OWNED):
            m.drop(path, f"{key} is managed by the operator here", Level.WARNING)
        else:
            m.put(path, (*dst, key), body[key])


DATABASE_TYPE = ("accounting", "database", "type")


def moco(m: Migration, src: Path, value: Any, dst: Path) -> None:
    body = m.mapping(src, value)
    for key in sorted(body or {}):
        path, item = (*src, key), body[key]
        if key == "enabled":
            _moco_enabled(m, path, item)
        elif key == "migration":
            migration = m.mapping(path, item)
            if migration is not None and migration.get("enabled") is True:
                m.fail(
                    (*path, "enabled"),
                    "a 6.x → 7.x move to MOCO is under way; its data is in two databases",
                    "finish it on 7.x (moco.migration.enabled and mysql.enabled false), then "
                    "migrate",
                )
            elif migration is not None:
                m.drop(path, "the 6.x → 7.x MOCO migration switch, off")
        else:
            decisions.walk(m, path, item, (*dst, key))


def _moco_enabled(m: Migration, src: Path, value: Any) -> None:
    if value is True:
        if m.put(src, DATABASE_TYPE, "moco"):
            m.note(
                Action.RENAMED,
                Level.WARNING,
                src,
                "→ accounting.database.type: moco. The operator makes a MySQLCluster of its own: "
                "the 7.x database's rows are not moved",
                "dump the 7.x accounting database (mysqldump) and load it into the new one "
                "before slurmdbd starts, or point accounting.external at the 7.x MySQLCluster",
            )
    elif value in (False, None):
        m.drop(src, "MOCO off")
    else:
        m.fail(src, f"expected true or false, not {kind(value)}")


def database_backend(m: Migration) -> None:
    """The `--reuse-values` trap in values form: a 7.x file that names no backend got the 7.x
    chart's default, and this chart's default is another database."""
    data = m.doc.data
    accounting = data.get("accounting") if isinstance(data.get("accounting"), dict) else {}
    if accounting.get("enabled") is False or m.origin.get(DATABASE_TYPE):
        return
    if isinstance(accounting.get("external"), dict) and accounting["external"].get("enabled"):
        return
    if isinstance(accounting.get("database"), dict) and accounting["database"].get("type"):
        return
    if isinstance(data.get("mysql"), dict) and data["mysql"].get("enabled") is True:
        return  # refused on its own
    m.note(
        Action.NOTICE,
        Level.WARNING,
        ("accounting",),
        "no database backend is named (no moco.enabled, mysql.enabled or accounting.external); "
        "this chart's default is a new, empty embedded MariaDB",
        "set accounting.database.type (moco) or accounting.external to keep the 7.x database",
    )


# --------------------------------------------------------------------------- compute

CUDA_DEFINITION = re.compile(r"^cu[0-9]{3}$")
DEFINITIONS = ("compute", "definitions")


def nodes(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """Groups, and the 7.x trick of a disabled group used as a definition by others."""
    body = m.mapping(src, value)
    if body is None:
        return
    inline = _inline_definitions(body)
    for name in sorted(body, key=str):
        path, group = (*src, name), m.mapping((*src, name), body[name])
        if group is None:
            continue
        if name in inline:
            m.note(Action.RENAMED, Level.NOTE, path, f"→ compute.definitions.{name} (used as one)")
            for key in sorted(group):
                if key != "enabled":
                    decisions.walk(m, (*path, key), group[key], (*DEFINITIONS, name, key))
            if group.get("enabled") is False:
                continue
        if not group:
            m.put(path, (*dst, name), {})
        for key in sorted(group):
            decisions.walk(m, (*path, key), group[key], (*dst, name, key))


def _inline_definitions(groups: dict[str, Any]) -> set[str]:
    named = set()
    for group in groups.values():
        if isinstance(group, dict) and isinstance(group.get("definitions"), list):
            named |= {d for d in group["definitions"] if isinstance(d, str)}
    return named & set(groups)


def definitions(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        m.fail(src, f"expected a list of definition names, not {kind(value)}")
        return
    if dst[:2] == DEFINITIONS:
        m.fail(src, "a definition that names definitions: this chart does not chain them")
        return
    compute = m.doc.data.get("compute") or {}
    groups, own = compute.get("nodes") or {}, compute.get("definitions") or {}
    kept = []
    for index, name in enumerate(value):
        path = (*src, index)
        if name in groups or name in own:
            kept.append(name)
        elif name in STOCK_DEFINITIONS:
            kept.append(name)
            m.note(
                Action.NOTICE,
                Level.WARNING,
                path,
                f"{name}: this chart's stock definition of that name; its resources may differ "
                "from SUNK's compute-defs",
            )
        elif CUDA_DEFINITION.match(name):
            m.drop(path, f"{name}: SUNK's CUDA image definition; images are not carried")
        else:
            m.fail(
                path,
                f"{name}: a SUNK stock definition (compute-defs) whose content is not public, "
                "so what it set cannot be carried",
                f"write its resources, affinity and tolerations under compute.definitions.{name}",
            )
    if kept:
        m.put(src, dst, kept)


def gres_gpu(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if value == "":
        m.rename(src, dst, None, "empty text meant no GPUs")
    else:
        m.put(src, dst, value)


def features(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if isinstance(value, list):
        m.rename(src, (*dst, "static"), value, "the older list form")
    else:
        m.put(src, dst, value)


def partitions(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """Raw slurm.conf partition lines become this chart's partitions, or are refused."""
    if isinstance(value, list):
        m.put(src, dst, value)
        return
    if value in (None, ""):
        m.drop(src, "empty")
        return
    if not isinstance(value, str):
        m.fail(src, f"expected partition lines (text) or a list, not {kind(value)}")
        return
    groups = set((m.doc.data.get("compute") or {}).get("nodes") or {})
    parsed: list[dict[str, Any]] = []
    for number, raw in enumerate(value.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        part, problem = partition_line(line, groups)
        if problem:
            m.fail(
                src,
                f"line {number} of the text, `{line}`: {problem}",
                "write the partition as {name, nodeSets, default, config} by hand",
            )
            return
        parsed.append(part)
    m.rename(src, dst, parsed, "raw lines parsed into {name, nodeSets, default, config}")


def partition_line(line: str, groups: set[str]) -> tuple[dict[str, Any], str | None]:
    """One `PartitionName=… Nodes=… Key=value` line as a partition, or why it cannot be."""
    pairs: dict[str, tuple[str, str]] = {}
    for word in line.split():
        key, sep, item = word.partition("=")
        if not sep:
            return {}, f"`{word}` is not Key=Value"
        pairs[key.lower()] = (key, item)
    if line.split("=", 1)[0].lower() != "partitionname":
        return {}, "a partition line starts with PartitionName="
    name = pairs.pop("partitionname")[1]
    if name.upper() == "DEFAULT":
        return {}, "PartitionName=DEFAULT (defaults for later lines) has no counterpart"
    members = pairs.pop("nodes", ("", ""))[1]
    if not members:
        return {}, "no Nodes="
    node_sets = ["ALL" if n.upper() == "ALL" else n for n in members.split(",")]
    for member in node_sets:
        if member != "ALL" and member not in groups:
            return {}, (
                f"Nodes: `{member}` is not a node group of compute.nodes (Slurm node names and "
                "hostlists cannot be carried: nodes here are dynamic, named after their Pods)"
            )
    part: dict[str, Any] = {"name": name, "nodeSets": node_sets}
    default = pairs.pop("default", None)
    if default is not None:
        if default[1].upper() not in ("YES", "NO"):
            return {}, f"Default={default[1]}: expected YES or NO"
        part["default"] = default[1].upper() == "YES"
    if pairs:
        part["config"] = {key: _scalar(item) for key, item in pairs.values()}
    return part, None


# --------------------------------------------------------------------------- directory

OUR_DIRECTORY_KEYS = frozenset(f.alias or k for k, f in DirectoryService.model_fields.items())


def directory_service(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """The older chart's SSSD (`directories: [...]`) is refused while a directory is on;
    this chart's own shape is carried."""
    body = m.mapping(src, value)
    if body is None:
        return
    if set(body) <= OUR_DIRECTORY_KEYS:
        m.put(src, dst, body)
        return
    directories = body.get("directories") if isinstance(body.get("directories"), list) else []
    for index, directory in enumerate(directories):
        if isinstance(directory, dict) and directory.get("enabled"):
            m.fail(
                (*src, "directories", index),
                "SUNK's SSSD directories (ldapUri, user.*, schema AD/POSIX, additionalConfig) "
                "have another shape here, and their bind secret holds an SSSD snippet",
                "write directoryService {enabled, ldapUri, searchBase, bindDn, "
                "bindPasswordSecret, schema} yourself (README: directory users)",
            )
            return
    m.drop(src, "SUNK's SSSD settings with no directory enabled (SUNK 8.0 removes SSSD)")
