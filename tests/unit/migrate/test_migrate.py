"""`sunkctl migrate`: SUNK 7.x values files → this chart's values.

The data files are shaped after SUNK's documentation (sunk-anywhere's EKS values, the older
quickstart values); each renamed, dropped and refused key is checked on its own, and every
migrated file must pass `sunkctl validate`'s own pipeline."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.migrate import Level, check_output, dump, migrate_file
from sunk.migrate.decisions import decision
from sunk.validate import Options, Severity, validate

DATA = Path(__file__).parent / "data"
EXAMPLES = sorted(DATA.glob("*.yaml"))
# The 7.x slurm chart's top-level keys (the SUNK reference, §2.1).
SUNK7_KEYS = (
    "global",
    "clusterName",
    "controller",
    "rest",
    "accounting",
    "login",
    "slurm-login",
    "compute",
    "moco",
    "mysql",
    "autoPartition",
    "cacheDropper",
    "sunkDevicePlugin",
    "sunkScheduler",
    "scheduler",
    "syncer",
    "secretJob",
    "cleanupCompleting",
    "nsscache",
    "directoryService",
    "munge",
    "slurmConfig",
    "jwt",
    "imagePullSecrets",
    "network",
)


def run(*args: str):
    result = CliRunner().invoke(app, ["migrate", *args])
    assert "Traceback" not in result.output
    return result


def migrate_text(tmp_path: Path, text: str):
    path = tmp_path / "values-7.yaml"
    path.write_text(textwrap.dedent(text))
    return migrate_file(str(path), "values-7.yaml")


def get(values: dict, dotted: str):
    node = values
    for key in dotted.split("/"):
        node = node[key]
    return node


def note_for(result, path: str):
    return [n for n in result.notes if n.path == path]


# --------------------------------------------------------------------------- whole files


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_migrate_documented_files_validate_clean(example: Path, tmp_path, monkeypatch):
    """Each file migrates, and the output passes validate's schema and rules with no error."""
    monkeypatch.chdir(tmp_path)
    result = migrate_file(str(example), example.name)
    assert result.errors == []
    (tmp_path / "out.yaml").write_text(dump(result.values, example.name))
    report = validate(Options(paths=["out.yaml"], render=False))
    assert report.errors == [], [f.message for f in report.errors]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_migrate_documented_files_render_clean(example: Path, tmp_path, monkeypatch, helm):
    """…and renders: helm template, the Kubernetes schemas and the Slurm renderer."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.yaml"
    assert run("-f", str(example), "-o", str(out)).exit_code == 0
    report = validate(Options(paths=["out.yaml"], render=True, helm=helm))
    assert report.errors == [], [f.message for f in report.errors]
    assert "render" in report.files[0].checks and report.files[0].rendered > 0


def test_migrate_eks_shape(tmp_path):
    values = migrate_file(str(DATA / "sunk-anywhere-eks.yaml"), "eks.yaml").values
    compute = values["compute"]
    # disabled groups named as definitions become definitions; the CUDA image def is gone
    assert set(compute["definitions"]) == {"eks-cpu-m5", "eks-gpu-g5"}
    assert "enabled" not in compute["definitions"]["eks-gpu-g5"]
    assert set(compute["nodes"]) == {"cpu-workers", "gpu-workers"}
    assert compute["nodes"]["gpu-workers"]["definitions"] == ["eks-gpu-g5"]
    assert compute["reservedMemory"] == "2048Mi"
    assert values["accounting"]["database"]["type"] == "moco"
    assert values["login"]["service"]["externalTrafficPolicy"] == "Cluster"
    assert values["slurmConfig"]["cgroupConfig"]["IgnoreSystemd"] is True
    for component in ("controller", "rest", "accounting", "login"):
        assert "image" not in values.get(component, {})


def test_migrate_decision_table_names_every_documented_top_level_key():
    assert [key for key in SUNK7_KEYS if decision((key,)) is None] == []


# --------------------------------------------------------------------------- renamed keys

RENAMED = [
    ("slurmConfig: {killWait: 45}", "slurmConfig.killWait", "scheduler/killWait", 45),
    (
        "slurmConfig: {inactiveLimit: 0}",
        "slurmConfig.inactiveLimit",
        "slurmConfig/InactiveLimit",
        0,
    ),
    ("slurmConfig: {waitTime: 0}", "slurmConfig.waitTime", "slurmConfig/WaitTime", 0),
    (
        "slurmConfig: {selectTypeParameters: CR_Core}",
        "slurmConfig.selectTypeParameters",
        "slurmConfig/SelectTypeParameters",
        "CR_Core",
    ),
    (
        "slurmConfig: {defMemPerCPU: 4096}",
        "slurmConfig.defMemPerCPU",
        "slurmConfig/DefMemPerCPU",
        4096,
    ),
    (
        "slurmConfig: {slurmCtld: {timeout: 60}}",
        "slurmConfig.slurmCtld.timeout",
        "slurmConfig/SlurmctldTimeout",
        60,
    ),
    (
        "slurmConfig: {slurmCtld: {additionalParameters: [idle_on_node_suspend]}}",
        "slurmConfig.slurmCtld.additionalParameters",
        "slurmConfig/SlurmctldParameters",
        ["idle_on_node_suspend"],
    ),
    (
        "slurmConfig: {slurmCtld: {TaskPlugin: task/affinity}}",
        "slurmConfig.slurmCtld.TaskPlugin",
        "slurmConfig/TaskPlugin",
        "task/affinity",
    ),
    (
        "slurmConfig: {slurmCtld: {accountingStorageEnforce: 'qos,limits'}}",
        "slurmConfig.slurmCtld.accountingStorageEnforce",
        "slurmConfig/AccountingStorageEnforce",
        "qos,limits",
    ),
    (
        "slurmConfig: {slurmd: {timeout: 30}}",
        "slurmConfig.slurmd.timeout",
        "slurmConfig/SlurmdTimeout",
        30,
    ),
    (
        "slurmConfig: {slurmd: {suspendTime: INFINITE}}",
        "slurmConfig.slurmd.suspendTime",
        "slurmConfig/SuspendTime",
        "INFINITE",
    ),
    (
        'slurmConfig: {cgroupConfig: "CgroupPlugin=autodetect\\nConstrainCores=yes\\n"}',
        "slurmConfig.cgroupConfig",
        "slurmConfig/cgroupConfig",
        {"CgroupPlugin": "autodetect", "ConstrainCores": "yes"},
    ),
    (
        "global: {nodeSelector: {affinity: {nodeAffinity: {}}}}",
        "global.nodeSelector.affinity",
        "global/affinity",
        {"nodeAffinity": {}},
    ),
    (
        "compute: {securityContext: {privileged: true}}",
        "compute.securityContext",
        "compute/nodeDefaults/securityContext",
        {"privileged": True},
    ),
    (
        "compute: {reservedMemory: '2048'}",
        "compute.reservedMemory",
        "compute/reservedMemory",
        "2048Mi",
    ),
    (
        "compute: {nodes: {a: {features: [cpu]}}}",
        "compute.nodes.a.features",
        "compute/nodes/a/features/static",
        ["cpu"],
    ),
    (
        "compute: {nodes: {a: {gresGpu: ''}}}",
        "compute.nodes.a.gresGpu",
        "compute/nodes/a/gresGpu",
        None,
    ),
    (
        "compute: {nodes: {a: {definitions: [d]}, d: {enabled: false, skuCpu: 4}}}",
        "compute.nodes.d",
        "compute/definitions/d",
        {"skuCpu": 4},
    ),
    (
        "compute:\n  nodes: {a: {}}\n  partitions: |\n"
        "    PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE\n",
        "compute.partitions",
        "compute/partitions",
        [{"name": "all", "nodeSets": ["ALL"], "default": True, "config": {"MaxTime": "INFINITE"}}],
    ),
    ("moco: {enabled: true}", "moco.enabled", "accounting/database/type", "moco"),
    (
        "moco: {mysqlCluster: {persistence: {size: 20Gi}}}",
        "moco.mysqlCluster.persistence.size",
        "accounting/database/moco/storage/size",
        "20Gi",
    ),
    (
        "moco: {mysqlCluster: {resources: {limits: {memory: 1Gi}}}}",
        "moco.mysqlCluster.resources",
        "accounting/database/moco/resources",
        {"limits": {"memory": "1Gi"}},
    ),
    (
        "login: {service: {metadata: {global: {annotations: {a: b}}}}}",
        "login.service.metadata.global.annotations",
        "login/service/annotations",
        {"a": "b"},
    ),
    (
        "login: {service: {type: LoadBalancer, externalTrafficPolicy: ''}}",
        "login.service.externalTrafficPolicy",
        "login/service/externalTrafficPolicy",
        "Cluster",
    ),
    (
        "autoPartition: {enabled: true}",
        "autoPartition.enabled",
        "compute/autoPartition/enabled",
        True,
    ),
    (
        "cacheDropper: {enabled: false}",
        "cacheDropper.enabled",
        "compute/cacheDropper/enabled",
        False,
    ),
    ("syncer: {logLevel: warn}", "syncer.logLevel", "syncer/logLevel", "warning"),
]


@pytest.mark.parametrize("text, source, target, expected", RENAMED, ids=[r[1] for r in RENAMED])
def test_migrate_renamed_key(tmp_path, text, source, target, expected):
    result = migrate_text(tmp_path, text)
    assert result.errors == []
    assert get(result.values, target) == expected
    assert [n.action for n in note_for(result, source)] == ["renamed"]
    if "/".join(source.split(".")) != target:
        top = source.split(".")[0]
        assert top == target.split("/")[0] or top not in result.values


# --------------------------------------------------------------------------- dropped keys

DROPPED = [
    ("global: {cks: false}", "global.cks", "imageRegistry"),
    ("global: {nodeSelector: {affinity: null}}", "global.nodeSelector.affinity", "sets none"),
    ("global: {somethingElse: 1}", "global.somethingElse", "nothing in this chart reads it"),
    ("controller: {image: {repository: x, tag: y}}", "controller.image", "opensunk"),
    ("controller: {replicas: 1}", "controller.replicas", "controller.ha"),
    (
        "controller: {livenessProbe: {exec: {command: [sinfo]}}}",
        "controller.livenessProbe",
        "probes",
    ),
    (
        "controller: {stateVolume: {storageType: block-nvme}}",
        "controller.stateVolume.storageType",
        "storageClassName",
    ),
    ("controller: {etcConfigMap: null}", "controller.etcConfigMap", "nothing to carry"),
    ("rest: {image: {repository: x}}", "rest.image", "opensunk"),
    (
        "accounting: {config: {AuthType: auth/munge}}",
        "accounting.config.AuthType",
        "managed by the operator",
    ),
    ("login: {sshKeyVolume: {size: 1Gi}}", "login.sshKeyVolume", "host keys"),
    ("login: {service: {exposePublicIP: false}}", "login.service.exposePublicIP", "annotations"),
    (
        "login: {service: {additionalPorts: []}}",
        "login.service.additionalPorts",
        "nothing to carry",
    ),
    (
        "login: {loginController: {podMonitor: {enabled: false}}}",
        "login.loginController",
        "not run here",
    ),
    ("login: {containers: []}", "login.containers", "nothing to carry"),
    (
        "login: {service: {externalTrafficPolicy: Local}}",
        "login.service.externalTrafficPolicy",
        "ClusterIP",
    ),
    ("slurm-login: {enabled: false}", "slurm-login", "deletes it"),
    (
        "compute: {nodes: {a: {definitions: [cu130]}}}",
        "compute.nodes.a.definitions[0]",
        "CUDA image",
    ),
    (
        "compute: {nodes: {a: {image: {name: slurmd-cw-cu130}}}}",
        "compute.nodes.a.image",
        "opensunk",
    ),
    (
        "compute: {pyxis: {enrootConfig: {ENROOT_DATA_PATH: '/x/user-$(id -u)'}}}",
        "compute.pyxis.enrootConfig.ENROOT_DATA_PATH",
        "not one word",
    ),
    ("moco: {migration: {enabled: false}}", "moco.migration", "off"),
    (
        "moco: {mysqlCluster: {nodeSelector: {a: b}}}",
        "moco.mysqlCluster.nodeSelector",
        "no placement",
    ),
    ("mysql: {enabled: false, auth: {username: x}}", "mysql", "off"),
    ("sunkDevicePlugin: {enabled: false}", "sunkDevicePlugin", "nvidia-device-plugin"),
    ("sunkScheduler: {enabled: false}", "sunkScheduler", "dead key"),
    ("scheduler: {resources: {requests: {cpu: 1}}}", "scheduler.resources", "inside the operator"),
    (
        "scheduler: {config: {slurm: {protocolVersion: '24_11'}}}",
        "scheduler.config.slurm.protocolVersion",
        "slurmrestd",
    ),
    ("syncer: {tolerations: []}", "syncer.tolerations", "inside the operator"),
    ("syncer: {maxConcurrentReconciles: 10}", "syncer.maxConcurrentReconciles", "no such knob"),
    ("secretJob: {tolerations: []}", "secretJob", "munge.existingSecret"),
    ("cleanupCompleting: {tolerations: []}", "cleanupCompleting", "cleanup-completing"),
    ("network: {vpcs: []}", "network", "NOT USED"),
    (
        "directoryService: {directories: [{name: default, enabled: false}]}",
        "directoryService",
        "SSSD",
    ),
    (
        "slurmConfig: {slurmCtld: {procTrackType: proctrack/linuxproc}}",
        "slurmConfig.slurmCtld.procTrackType",
        "managed by the operator",
    ),
    (
        "slurmConfig: {slurmd: {prologConfigMap: null}}",
        "slurmConfig.slurmd.prologConfigMap",
        "nothing to carry",
    ),
    (
        "slurmConfig: {slurmCtld: {jobSubmitPlugins: null}}",
        "slurmConfig.slurmCtld.jobSubmitPlugins",
        "null",
    ),
]


@pytest.mark.parametrize("text, source, words", DROPPED, ids=[d[1] for d in DROPPED])
def test_migrate_dropped_key(tmp_path, text, source, words):
    result = migrate_text(tmp_path, text)
    assert result.errors == []
    notes = note_for(result, source)
    assert [n.action for n in notes] == ["dropped"], result.notes
    assert words in notes[0].message
    assert notes[0].line is not None


# --------------------------------------------------------------------------- refused keys

REFUSED = [
    ("mysql:\n  enabled: true\n", "mysql.enabled", 2, "Bitnami MySQL"),
    ("moco:\n  migration:\n    enabled: true\n", "moco.migration.enabled", 3, "under way"),
    ("slurm-login:\n  enabled: true\n", "slurm-login.enabled", 2, "per-user login pods"),
    (
        "compute:\n  partitions: |\n    PartitionName=gpu Nodes=gpu-[001-004]\n",
        "compute.partitions",
        2,
        "hostlists cannot be carried",
    ),
    (
        "compute:\n  partitions: |\n    PartitionName=DEFAULT MaxTime=60\n",
        "compute.partitions",
        2,
        "PartitionName=DEFAULT",
    ),
    ("compute:\n  partitions: |\n    Nodes=ALL oops\n", "compute.partitions", 2, "not Key=Value"),
    (
        "slurmConfig:\n  slurmd:\n    prologConfigMap: my-prologs\n",
        "slurmConfig.slurmd.prologConfigMap",
        3,
        "prologScripts",
    ),
    (
        "slurmConfig:\n  slurmCtld:\n    jobSubmitPlugins: lua\n",
        "slurmConfig.slurmCtld.jobSubmitPlugins",
        3,
        "jobSubmitLua",
    ),
    (
        "slurmConfig:\n  cgroupConfig: |\n    ConstrainCores yes\n",
        "slurmConfig.cgroupConfig",
        2,
        "not Key=Value",
    ),
    ("slurmConfig:\n  killWait: 2\n", "slurmConfig.killWait", 2, "6 to 65535"),
    ("slurmConfig:\n  bogusKey: 1\n", "slurmConfig.bogusKey", 2, "not a slurm.conf key"),
    ("controller:\n  etcConfigMap: extra-files\n", "controller.etcConfigMap", 2, "would be lost"),
    ("controller:\n  replicas: 2\n", "controller.replicas", 2, "controller.ha"),
    ("global:\n  nodeSelector:\n    region: LAS1\n", "global.nodeSelector.region", 3, "region"),
    ("login:\n  containers: [{name: x}]\n", "login.containers", 2, "sidecar"),
    (
        "login:\n  service:\n    additionalPorts: [{port: 2022}]\n",
        "login.service.additionalPorts",
        3,
        "extra ports",
    ),
    (
        "accounting:\n  external:\n    password: hunter2\n",
        "accounting.external.password",
        3,
        "passwordSecret",
    ),
    (
        "directoryService:\n  directories:\n    - name: default\n      enabled: true\n",
        "directoryService.directories[0]",
        3,
        "another shape",
    ),
    (
        "compute:\n  nodes:\n    a:\n      definitions: [xeon]\n",
        "compute.nodes.a.definitions[0]",
        4,
        "not public",
    ),
    (
        "compute:\n  nodes:\n    a:\n      bogus: 1\n",
        "compute.nodes.a.bogus",
        4,
        "not a SUNK 7.x key",
    ),
    (
        "slurmConfig: {killWait: 30}\nscheduler: {killWait: 20}\n",
        "slurmConfig.killWait",
        1,
        "scheduler.killWait",
    ),
    ("whatever: 1\n", "whatever", 1, "not a SUNK 7.x key"),
    ("controller: 3\n", "controller", 1, "expected a map, not a number"),
    ("compute:\n  nodes: [a, b]\n", "compute.nodes", 2, "expected a map, not a list"),
]


@pytest.mark.parametrize("text, source, line, words", REFUSED, ids=[r[1] for r in REFUSED])
def test_migrate_refuses(tmp_path, monkeypatch, text, source, line, words):
    """Exit 1, nothing written, one error line naming the file, line and key path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "values-7.yaml").write_text(text)
    result = run("-f", "values-7.yaml", "-o", "out.yaml")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert not (tmp_path / "out.yaml").exists()
    errors = [ln for ln in result.stderr.splitlines() if "  error  " in ln]
    assert any(
        ln.startswith(f"values-7.yaml:{line}:") and f"  failed  error  {source}: " in ln
        for ln in errors
    ), result.stderr
    assert words in result.stderr  # in the message or its hint
    assert result.stderr.splitlines()[-1].startswith("not migrated: ")


@pytest.mark.parametrize(
    "text, words",
    [
        ("a: [\n", "YAML syntax error"),
        ("- a\n- b\n", "must be a map at the top level, not a list"),
        ("just text\n", "must be a map at the top level, not a single value"),
        ("a: 1\n---\nb: 2\n", "2 YAML documents"),
        ("clusterName: a\nclusterName: b\n", "duplicate"),
        ("\xff\xfe", "not UTF-8"),
    ],
    ids=["syntax", "list", "scalar", "two-documents", "duplicate-key", "binary"],
)
def test_migrate_bad_input_is_one_clear_error(tmp_path, monkeypatch, text, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "values-7.yaml").write_bytes(text.encode("latin-1"))
    result = run("-f", "values-7.yaml")
    assert result.exit_code == 1
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith("values-7.yaml") and "  failed  error  " in first and words in first


def test_migrate_refuses_output_the_schema_rejects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "values-7.yaml").write_text("clusterName: Not_A_Label\n")
    result = run("-f", "values-7.yaml", "-o", "out.yaml")
    assert result.exit_code == 1
    assert not (tmp_path / "out.yaml").exists()
    assert "  SCHEMA  error  clusterName: " in result.stderr


def test_migrate_missing_file_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("-f", "nope.yaml")
    assert result.exit_code == 2
    assert result.stderr.strip() == "sunkctl migrate: error: -f nope.yaml: no such file"


# --------------------------------------------------------------------------- warnings, output


def test_migrate_warns_about_reuse_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "values-7.yaml").write_text("clusterName: a\n")
    result = run("-f", "values-7.yaml")
    assert result.exit_code == 0
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        "values-7.yaml  notice  warning  Do not run `helm upgrade --reuse-values`"
    )
    assert "wrong database backend" in first
    assert "--reuse-values" not in result.stdout


def test_migrate_warns_when_no_database_backend_is_named(tmp_path):
    result = migrate_text(tmp_path, "clusterName: a\n")
    [note] = note_for(result, "accounting")
    assert note.level == Level.WARNING and "embedded MariaDB" in note.message
    assert note_for(migrate_text(tmp_path, "moco: {enabled: true}\n"), "accounting") == []


def test_migrate_warns_about_the_login_service_default(tmp_path):
    result = migrate_text(tmp_path, "login: {replicas: 1}\n")
    assert any("LoadBalancer" in n.message for n in note_for(result, "login"))
    result = migrate_text(tmp_path, "login: {service: {type: ClusterIP}}\n")
    assert note_for(result, "login") == []


def test_migrate_notes_go_to_stderr_and_values_to_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = DATA / "sunk-anywhere-eks.yaml"
    result = run("-f", str(source))
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["clusterName"] == "sunk-eks"
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("migrated: ")
    assert all(
        ln.startswith(("    hint: ", "migrated: ", str(source))) or " (migrated)" in ln
        for ln in lines
    ), result.stderr
    # validate's warnings of the output (SUNK027: accepted, not acted on) are shown too
    assert any("  SUNK027  warning  " in ln for ln in lines)


def test_migrate_is_deterministic(tmp_path, monkeypatch):
    """Two runs give the same bytes, and the order of the input's keys does not matter."""
    monkeypatch.chdir(tmp_path)
    source = DATA / "sunk-anywhere-eks.yaml"
    first, second = run("-f", str(source)), run("-f", str(source))
    assert first.stdout == second.stdout and first.stderr == second.stderr
    assert run("-f", str(source), "-o", "a.yaml").exit_code == 0
    assert run("-f", str(source), "-o", "b.yaml").exit_code == 0
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()
    data = yaml.safe_load(source.read_text())
    reordered = tmp_path / "sunk-anywhere-eks.yaml"
    reordered.write_text(yaml.safe_dump(dict(reversed(list(data.items()))), sort_keys=False))
    assert list(yaml.safe_load(reordered.read_text())) != list(data)
    result = migrate_file(str(reordered), "x")
    assert dump(result.values, "x") == dump(migrate_file(str(source), "x").values, "x")


def test_migrate_output_keeps_scripts_as_blocks(tmp_path):
    values = migrate_file(str(DATA / "sunk-anywhere-eks.yaml"), "eks.yaml").values
    text = dump(values, "eks.yaml")
    assert "script: |" in text
    assert yaml.safe_load(text) == values


def test_migrate_check_output_is_validate(tmp_path):
    """The command's own check is validate's pipeline: it reports what validate reports."""
    findings = check_output("clusterName: Not_A_Label\n")
    assert [(f.rule_id, f.severity, f.key_path) for f in findings] == [
        ("SCHEMA", Severity.ERROR, "clusterName")
    ]
