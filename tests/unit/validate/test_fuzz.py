"""Property-based fuzzing: whatever the values file holds, validate reports findings and
never crashes (no traceback, exit 0/1 only). Runs without helm (--no-render)."""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.validate import Options, validate

KEYS = [
    "compute",
    "nodes",
    "partitions",
    "gpu",
    "cpu",
    "replicas",
    "resources",
    "requests",
    "limits",
    "memory",
    "nvidia.com/gpu",
    "gresGpu",
    "definitions",
    "h100",
    "cpu-epyc",
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "slurmConfig",
    "accounting",
    "external",
    "host",
    "passwordSecret",
    "database",
    "type",
    "login",
    "service",
    "externalTrafficPolicy",
    "scheduler",
    "enabled",
    "killWait",
    "name",
    "nodeSets",
    "default",
    "config",
    "image",
    "tag",
    "repository",
    "tolerations",
    "reservedMemory",
    "maxUnavailable",
    "terminationGracePeriodSeconds",
    "partitionConfig",
    "nodeSelector",
    "skuCpu",
    "DEFAULT",
    "Nodes",
    "In",
    "NotIn",
    "Exists",
    "ClusterName",
    "FastSchedule",
    "crds",
    "extraObjects",
]
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "4Gi",
            "h100:8",
            "8",
            "latest",
            "ClusterIP",
            "external",
            "moco",
            "ALL",
            "In",
            "Exists",
            "10%",
            "-1",
            "",
            "yes",
        ]
    ),
    st.text(max_size=8),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=6))
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=25,
)
group = st.dictionaries(st.sampled_from(KEYS), trees, max_size=6)
shaped = st.fixed_dictionaries(
    {
        "compute": st.fixed_dictionaries(
            {
                "nodes": st.dictionaries(st.sampled_from([*KEYS, "a", "b"]), group, max_size=4),
                "partitions": st.one_of(
                    st.text(max_size=40),
                    st.lists(st.dictionaries(st.sampled_from(KEYS), trees, max_size=4), max_size=3),
                ),
            },
            optional={"reservedMemory": leaves, "maxUnavailable": leaves},
        )
    },
    optional={
        "slurmConfig": st.dictionaries(keys, leaves, max_size=4),
        "accounting": st.dictionaries(st.sampled_from(KEYS), trees, max_size=4),
        "scheduler": st.dictionaries(st.sampled_from(KEYS), trees, max_size=3),
        "login": st.dictionaries(st.sampled_from(KEYS), trees, max_size=3),
    },
)
documents = st.one_of(shaped, st.dictionaries(keys, trees, max_size=6))


def _check_report(report) -> None:
    assert report.exit_code(False) in (0, 1)
    for finding in report.findings:
        assert finding.rule_id and finding.message
        assert str(finding.severity) in ("error", "warning")


@SETTINGS
@given(documents)
def test_any_values_document_gives_a_report(tmp_path, doc):
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    _check_report(validate(Options(paths=[str(path)], render=False)))


_YAML_CHARS = st.sampled_from(
    [*list(":-[]{}#&*!|>'\",?%@` \n\t"), "  ", "\n  ", "on", "a", "compute", "nodes", "1"]
)


@SETTINGS
@given(st.one_of(st.text(max_size=80), st.lists(_YAML_CHARS, max_size=40).map("".join)))
def test_any_text_gives_a_report(tmp_path, text):
    path = tmp_path / "v.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    _check_report(validate(Options(paths=[str(path)], render=False)))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shaped, st.lists(st.text(max_size=20), max_size=2))
def test_cli_never_shows_a_traceback(tmp_path, doc, sets):
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = ["validate", str(path), "--no-render", "-o", "json"]
    for expr in sets:
        args += ["--set", expr]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code != 2:
        json.loads(result.stdout)


# Schema-valid documents: here a crashing rule would not be hidden behind schema errors.
names = st.sampled_from(["a", "b", "gpu", "cpu", "x1"])
quantities = st.one_of(
    st.integers(min_value=0, max_value=4096), st.sampled_from(["500m", "4Gi", "1900Gi", "8", "0"])
)
expressions = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["pool", "zone"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    },
    optional={"values": st.lists(st.sampled_from(["p", "q", "r"]), max_size=2)},
)
affinity = st.fixed_dictionaries(
    {
        "nodeAffinity": st.fixed_dictionaries(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {
                        "nodeSelectorTerms": st.lists(
                            st.fixed_dictionaries(
                                {"matchExpressions": st.lists(expressions, max_size=2)}
                            ),
                            max_size=2,
                        )
                    }
                )
            }
        )
    }
)
valid_group = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "replicas": st.integers(min_value=0, max_value=5),
        "definitions": st.lists(st.sampled_from(["h100", "cpu-epyc", "l40s"]), max_size=2),
        "gresGpu": st.one_of(st.none(), st.sampled_from(["h100:8", "4", "a100:0"])),
        "skuCpu": st.integers(min_value=1, max_value=256),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "requests": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantities, max_size=3
                ),
                "limits": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantities, max_size=3
                ),
            },
        ),
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "key": st.sampled_from(["nvidia.com/gpu", "x"]),
                    "operator": st.sampled_from(["Exists", "Equal"]),
                },
            ),
            max_size=2,
        ),
        "affinity": affinity,
        "nodeSelector": st.dictionaries(st.sampled_from(["a", "b"]), st.just("v"), max_size=1),
        "terminationGracePeriodSeconds": st.integers(min_value=0, max_value=60),
        "partitionConfig": st.dictionaries(
            st.sampled_from(["Default", "MaxTime", "Nodes"]),
            st.sampled_from(["YES", "INFINITE", 1]),
            max_size=2,
        ),
        "image": st.fixed_dictionaries(
            {"repository": st.just("r")}, optional={"tag": st.sampled_from(["latest", "1.0"])}
        ),
    },
)
partition = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["p", "q", "DEFAULT", "a", "all"]),
        "nodeSets": st.lists(
            st.sampled_from(["a", "b", "gpu", "ALL", "zz"]), min_size=1, max_size=3
        ),
    },
    optional={
        "default": st.booleans(),
        "config": st.dictionaries(
            st.sampled_from(["Default", "MaxTime", "Nodes"]),
            st.sampled_from(["YES", "INFINITE", 2]),
            max_size=2,
        ),
    },
)
valid_docs = st.fixed_dictionaries(
    {
        "compute": st.fixed_dictionaries(
            {
                "nodes": st.dictionaries(names, valid_group, max_size=4),
                "partitions": st.one_of(
                    st.lists(partition, max_size=3),
                    st.sampled_from(["PartitionName=x Nodes=a,b Default=YES", ""]),
                ),
            },
            optional={
                "reservedMemory": st.sampled_from(["4Gi", "2000Gi", "0"]),
                "maxUnavailable": st.one_of(st.integers(min_value=0, max_value=9), st.just("50%")),
            },
        )
    },
    optional={
        "slurmConfig": st.dictionaries(
            st.sampled_from(["ClusterName", "KillWait", "FastSchedule", "defmempercpu"]),
            st.one_of(st.integers(min_value=0, max_value=99), st.text(max_size=4)),
            max_size=3,
        ),
        "scheduler": st.fixed_dictionaries(
            {"enabled": st.booleans(), "killWait": st.integers(min_value=6, max_value=40)}
        ),
        "accounting": st.fixed_dictionaries(
            {
                "database": st.fixed_dictionaries(
                    {"type": st.sampled_from(["mariadb", "moco", "external"])}
                ),
                "external": st.fixed_dictionaries(
                    {"enabled": st.booleans()}, optional={"host": st.sampled_from(["h", ""])}
                ),
            }
        ),
        "login": st.fixed_dictionaries(
            {
                "service": st.fixed_dictionaries(
                    {"type": st.sampled_from(["ClusterIP", "LoadBalancer"])}
                )
            }
        ),
    },
)


@SETTINGS
@given(valid_docs)
def test_rules_never_crash_on_schema_valid_values(tmp_path, doc):
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(doc))
    report = validate(Options(paths=[str(path)], render=False))  # a rule crash would raise
    _check_report(report)
