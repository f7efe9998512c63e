"""A corpus of hostile values: every carrier of text into a Slurm file, each with every
payload that would change the file's structure (a new line, a comment, a quote, an escape,
a control character; a space where the text is split on whitespace; a bad key).

Each case is (name, values, key path, injector). ``values`` is a values document for the
`slurm` chart; ``injector`` puts the same payload into a valid SlurmCluster spec or NodeSet
(past the models, as a hand-edited object in the operator's memory would be) so the
renderer's own guard is tested too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Payloads that are refused wherever they appear (quoting cannot make them safe).
LINE_BREAKERS = {
    "lf": "x\nAuthType=auth/none",
    "cr": "x\rAuthType=auth/none",
    "crlf": "x\r\nAuthType=auth/none",
    "hash": "x #AuthType=auth/none",
    "quote": 'x" AuthType=auth/none "',
    "backslash": "x\\",
    "tab": "x\tAuthType=auth/none",
    "esc": "x\x1bAuthType=auth/none",
    "del": "x\x7fy",
    "vt": "x\x0bAuthType=auth/none",
}
# A Lua plugin script is a whole file: line feeds, tabs, `#`, quotes and backslashes are Lua;
# what hides code from a reader is refused (sunk.slurmconf.guard.check_lua). The bidi control
# passes the models' pattern (no RE2/Python escape for it): validate's SUNK029 and the renderer
# refuse it.
LUA_BREAKERS = {
    "nul": "x = 1\x00",
    "cr": "x = 1 -- note\ros.execute('id')",
    "crlf": "x = 1\r\ny = 2",
    "esc": "x = 1 -- \x1b[2K",
    "del": "x = 1\x7f",
    "vt": "x = 1\x0by = 2",
    "bidi": "x = 1 -- \u202e",
}
# Where the text is split on whitespace (slurmd --conf, plugstack.conf, names), a space too.
SPACE = {"space": "x AuthType=auth/none"}
KEYS = {
    "key-space": "Max Time",
    "key-eq": "AuthType=auth/none x",
    "key-lf": "x\nAuthType",
    "key-hash": "#x",
    "key-quote": 'x"',
    "key-digit": "9lives",
    "key-dash": "Max-Time",
    "key-empty": "",
    "key-nbsp": "Max\u00a0Time",
}

Injector = Callable[[Any, list[Any], str], None]  # (cluster spec, nodesets, payload)


@dataclass(frozen=True)
class Case:
    name: str
    values: dict[str, Any]
    path: str  # the key path validate must report
    inject: Injector


GROUP = {"replicas": 1, "resources": {"limits": {"cpu": 4, "memory": "16Gi"}}}


def _group(**extra: Any) -> dict[str, Any]:
    return {"compute": {"nodes": {"g": {**GROUP, **extra}}}}


def _partition(config: dict[str, Any] | None = None, nodesets: list[str] | None = None) -> dict:
    part = {"name": "p", "nodeSets": nodesets or ["g"], "config": config or {}}
    return {"compute": {"nodes": {"g": GROUP}, "partitions": [part]}}


def _external(**external: Any) -> dict[str, Any]:
    ext = {
        "host": "db.example",
        "passwordSecret": {"name": "db"},
        **external,
    }
    return {"accounting": {"database": {"type": "external"}, "external": ext}}


def _set(obj: Any, attr: str, value: Any) -> None:
    object.__setattr__(obj, attr, value)


def _partition_cr(spec: Any, config: dict[str, Any], nodesets: list[str] | None = None) -> None:
    from sunk.models.values import Partition

    part = Partition.model_construct(
        name="p", nodeSets=nodesets or ["g"], default=False, config=config
    )
    _set(spec.compute, "partitions", [part])


DIRECTORY = {"enabled": True, "ldapUri": ["ldaps://ldap.example"], "searchBase": "dc=example"}


def _directory_values(**fields: Any) -> dict[str, Any]:
    return {"directoryService": {**DIRECTORY, **fields}}


def _directory(spec: Any, **fields: Any) -> None:
    """An enabled directoryService on a CR, written around the schema's patterns."""
    from sunk.models.values import DirectoryService

    _set(spec, "directoryService", DirectoryService().model_copy(update={**DIRECTORY, **fields}))


def _extra(spec: Any, key: str, value: Any) -> None:
    spec.slurmConfig.__pydantic_extra__[key] = value


# (carrier name, values builder, key path, injector) for value payloads.
QUOTED_CARRIERS: list[tuple[str, Callable[[str], dict], str, Injector]] = [
    (
        "slurmConfig-scalar",
        lambda p: {"slurmConfig": {"MaxJobCount": p}},
        "slurmConfig.MaxJobCount",
        lambda s, n, p: _extra(s, "MaxJobCount", p),
    ),
    (
        "slurmConfig-list",
        lambda p: {"slurmConfig": {"SchedulerParameters": ["bf_continue", p]}},
        "slurmConfig.SchedulerParameters[1]",
        lambda s, n, p: _extra(s, "SchedulerParameters", ["bf_continue", p]),
    ),
    (
        "partition-config",
        lambda p: _partition({"MaxTime": p}),
        "compute.partitions[0].config.MaxTime",
        lambda s, n, p: _partition_cr(s, {"MaxTime": p}),
    ),
    (
        "partitionConfig",
        lambda p: _group(partitionConfig={"MaxTime": p}),
        "compute.nodes.g.partitionConfig.MaxTime",
        lambda s, n, p: n[0].spec.partitionConfig.__setitem__("MaxTime", p),
    ),
    (
        "cgroupConfig",
        lambda p: {"slurmConfig": {"cgroupConfig": {"ConstrainCores": p}}},
        "slurmConfig.cgroupConfig.ConstrainCores",
        lambda s, n, p: s.slurmConfig.cgroupConfig.__setitem__("ConstrainCores", p),
    ),
    (
        "mpiConfig",
        lambda p: {"slurmConfig": {"mpiConfig": {"PMIxTimeout": p}}},
        "slurmConfig.mpiConfig.PMIxTimeout",
        lambda s, n, p: s.slurmConfig.mpiConfig.__setitem__("PMIxTimeout", p),
    ),
    (
        "accounting-config",
        lambda p: {"accounting": {"config": {"PurgeJobAfter": p}}},
        "accounting.config.PurgeJobAfter",
        lambda s, n, p: s.accounting.config.__setitem__("PurgeJobAfter", p),
    ),
]
QUOTED_CARRIERS += [
    (
        f"directoryService-{field}",
        lambda p, field=field: _directory_values(**{field: p}),
        f"directoryService.{field}",
        lambda s, n, p, field=field: _directory(s, **{field: p}),
    )
    for field in ("searchBase", "bindDn", "defaultShell", "homeDirectory")
]
WORD_CARRIERS: list[tuple[str, Callable[[str], dict], str, Injector]] = [
    (
        "directoryService-ldapUri",
        lambda p: _directory_values(ldapUri=["ldaps://ldap.example" + p]),
        "directoryService.ldapUri[0]",
        lambda s, n, p: _directory(s, ldapUri=["ldaps://ldap.example" + p]),
    ),
    (
        "partition-nodeSets",
        lambda p: _partition(nodesets=[p]),
        "compute.partitions[0].nodeSets[0]",
        lambda s, n, p: _partition_cr(s, {}, [p]),
    ),
    (
        "features-static",
        lambda p: _group(features={"static": [p]}),
        "compute.nodes.g.features.static[0]",
        lambda s, n, p: n[0].spec.features.staticFeatures.append(p),
    ),
    (
        "staticFeatures",
        lambda p: _group(staticFeatures=[p]),
        "compute.nodes.g.staticFeatures[0]",
        lambda s, n, p: n[0].spec.features.staticFeatures.append(p),
    ),
    (
        "dynamic-prefix",
        lambda p: _group(features={"dynamic": {"ib/pod": {"prefix": p}}}),
        'compute.nodes.g.features.dynamic["ib/pod"].prefix',
        None,  # needs a Node label; see test_dynamic_feature_from_node_label
    ),
    (
        "gresGpu",
        lambda p: _group(gresGpu=p),
        "compute.nodes.g.gresGpu",
        lambda s, n, p: _set(n[0].spec, "gresGpu", "h100" + p + ":8"),
    ),
    (
        "external-host",
        lambda p: _external(host=p),
        "accounting.external.host",
        None,  # the host reaches the renderer through Endpoints: test_..._external_host
    ),
    (
        "external-user",
        lambda p: _external(user=p),
        "accounting.external.user",
        lambda s, n, p: (
            _set(s.accounting.database, "type", "external"),
            _set(s.accounting.external, "user", p),
        ),
    ),
    (
        "database-name",
        lambda p: {"accounting": {"database": {"name": p}}},
        "accounting.database.name",
        lambda s, n, p: _set(s.accounting.database, "name", p),
    ),
    (
        "plugstackOptions",
        lambda p: {"compute": {"pyxis": {"enabled": True, "plugstackOptions": [p]}}},
        "compute.pyxis.plugstackOptions[0]",
        lambda s, n, p: _set(s.compute.pyxis, "plugstackOptions", [p]),
    ),
    (
        "mpi-env",  # an `env=NAME=VALUE` word on the container plugin's line
        lambda p: {"compute": {"pyxis": {"enabled": True}, "mpi": {"env": {"OMPI_MCA_btl": p}}}},
        "compute.mpi.env.OMPI_MCA_btl",
        lambda s, n, p: s.compute.mpi.env.__setitem__("OMPI_MCA_btl", p),
    ),
]
KEY_CARRIERS: list[tuple[str, Callable[[str], dict], str, Injector]] = [
    (
        "slurmConfig-key",
        lambda k: {"slurmConfig": {k: "1"}},
        "slurmConfig",
        lambda s, n, k: _extra(s, k, "1"),
    ),
    (
        "partition-config-key",
        lambda k: _partition({k: "1"}),
        "compute.partitions[0].config",
        lambda s, n, k: _partition_cr(s, {k: "1"}),
    ),
    (
        "partitionConfig-key",
        lambda k: _group(partitionConfig={k: "1"}),
        "compute.nodes.g.partitionConfig",
        lambda s, n, k: n[0].spec.partitionConfig.__setitem__(k, "1"),
    ),
    (
        "cgroupConfig-key",
        lambda k: {"slurmConfig": {"cgroupConfig": {k: "1"}}},
        "slurmConfig.cgroupConfig",
        lambda s, n, k: s.slurmConfig.cgroupConfig.__setitem__(k, "1"),
    ),
    (
        "mpiConfig-key",
        lambda k: {"slurmConfig": {"mpiConfig": {k: "1"}}},
        "slurmConfig.mpiConfig",
        lambda s, n, k: s.slurmConfig.mpiConfig.__setitem__(k, "1"),
    ),
    (
        "accounting-config-key",
        lambda k: {"accounting": {"config": {k: "1"}}},
        "accounting.config",
        lambda s, n, k: s.accounting.config.__setitem__(k, "1"),
    ),
]


def _lua(spec: Any, field: str, text: str) -> None:
    from sunk.models.values import LuaScript

    _set(spec.slurmConfig, field, LuaScript.model_construct(script=text, configMap=None))


LUA_CARRIERS: list[tuple[str, Callable[[str], dict], str, Injector]] = [
    (
        f"{field}-script",
        lambda p, field=field: {"slurmConfig": {field: {"script": p}}},
        f"slurmConfig.{field}.script",
        lambda s, n, p, field=field: _lua(s, field, p),
    )
    for field in ("jobSubmitLua", "cliFilterLua")
]


def cases() -> list[Case]:
    out = []
    for carrier, build, path, inject in LUA_CARRIERS:
        for name, payload in LUA_BREAKERS.items():
            out.append(Case(f"{carrier}-{name}", build(payload), path, _bind(inject, payload)))
    for carrier, build, path, inject in QUOTED_CARRIERS:
        for name, payload in LINE_BREAKERS.items():
            out.append(Case(f"{carrier}-{name}", build(payload), path, _bind(inject, payload)))
    for carrier, build, path, inject in WORD_CARRIERS:
        for name, payload in {**LINE_BREAKERS, **SPACE}.items():
            out.append(Case(f"{carrier}-{name}", build(payload), path, _bind(inject, payload)))
    for carrier, build, path, inject in KEY_CARRIERS:
        for name, key in KEYS.items():
            out.append(Case(f"{carrier}-{name}", build(key), path, _bind(inject, key)))
    return out


def _bind(inject: Injector | None, payload: str) -> Any:
    if inject is None:
        return None
    return lambda spec, nodesets: inject(spec, nodesets, payload)
