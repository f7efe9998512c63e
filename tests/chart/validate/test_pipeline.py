"""The whole pipeline through helm: layering, --set, the sunk chart, schema options."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app

# A kind with no schema of ours (the sunk chart renders its PodMonitor only where the API is
# served, which `helm template` never says; an extra object always renders).
MONITORING = """\
compute:
  nodes:
    cpu: {definitions: [cpu-epyc]}
extraObjects:
  - {apiVersion: monitoring.coreos.com/v1, kind: PodMonitor, metadata: {name: m}, spec: {}}
"""


def run(*args: str):
    result = CliRunner().invoke(app, ["validate", *args, "-o", "json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_base_file_path_file_and_set_reach_helm(helm, cwd):
    (cwd / "base.yaml").write_text("compute:\n  nodes:\n    cpu: {definitions: [cpu-epyc]}\n")
    (cwd / "site.yaml").write_text("clusterName: site\n")
    code, report = run("site.yaml", "-f", "base.yaml", "--set", "compute.nodes.cpu.replicas=3")
    assert code == 0, report
    assert report["files"][0]["rendered"] == 2  # SlurmCluster, NodeSet
    code, report = run("site.yaml", "-f", "base.yaml", "--set", "compute.nodes.cpu.replicas=-3")
    assert code == 1
    (finding,) = report["findings"]
    assert finding["file"] == "--set" and finding["ruleId"] == "SCHEMA"


def test_sunk_chart_renders_and_validates(helm, cwd):
    (cwd / "sunk.yaml").write_text("operator:\n  replicas: 3\n")
    code, report = run("sunk.yaml")
    assert code == 0, report
    assert report["files"][0]["chart"] == "sunk" and report["files"][0]["rendered"] > 3


def test_missing_schema_is_an_error_unless_relaxed(helm, cwd):
    (cwd / "mon.yaml").write_text(MONITORING)
    code, report = run("mon.yaml")
    assert code == 1
    assert report["findings"][0]["resource"]["kind"] == "PodMonitor"
    assert run("mon.yaml", "--ignore-missing-schemas")[0] == 0
    schema = cwd / "crds" / "monitoring.coreos.com" / "podmonitor_v1.json"
    schema.parent.mkdir(parents=True)
    schema.write_text('{"type": "object", "required": ["spec"]}')
    assert run("mon.yaml", "--crd-schemas", "crds")[0] == 0


@pytest.mark.parametrize("kubeconform", [True, False], ids=["kubeconform", "python"])
def test_every_object_error_is_reported(helm, cwd, monkeypatch, kubeconform):
    if not kubeconform:
        monkeypatch.setenv("SUNKCTL_NO_KUBECONFORM", "1")
    (cwd / "x.yaml").write_text(
        "compute:\n  nodes:\n    cpu: {definitions: [cpu-epyc]}\n"
        "extraObjects:\n  - apiVersion: v1\n    kind: ConfigMap\n"
        "    metadata: {name: extra, bogus: 1}\n    data: {answer: 42}\n"
    )
    code, report = run("x.yaml", "--kube-version", "1.33")
    assert code == 1
    keys = {f["keyPath"] for f in report["findings"] if f["ruleId"] == "K8S"}
    assert "data.answer" in keys and any(k and k.startswith("metadata") for k in keys)


def test_render_error_from_the_slurm_renderer_is_a_finding(helm, cwd):
    # Sizing the rules do not see (a definition-less group with only a CPU limit is fine);
    # a group whose memory is swallowed is reported once, at its values line (SUNK006).
    (cwd / "x.yaml").write_text(
        "compute:\n  reservedMemory: 64Gi\n  nodes:\n    cpu: {definitions: [cpu-epyc]}\n"
        "    small:\n      resources: {limits: {cpu: 2, memory: 8Gi}, "
        "requests: {cpu: 1, memory: 8Gi}}\n"
    )
    code, report = run("x.yaml")
    assert code == 1
    rules = [f["ruleId"] for f in report["findings"] if f["severity"] == "error"]
    assert "SUNK006" in rules and "RENDER" not in rules


def test_a_cel_rule_of_the_crd_refuses_what_the_values_schema_lets_through(helm, cwd):
    """The values schema has no cross-key rules; the CRD's CEL rule is evaluated offline."""
    (cwd / "dir.yaml").write_text("directoryService:\n  enabled: true\n  searchBase: dc=x\n")
    code, report = run("dir.yaml")
    assert code == 1, report
    cel = [f for f in report["findings"] if "a CEL rule of the CRD" in f["message"]]
    assert len(cel) == 1, report["findings"]
    assert cel[0]["keyPath"] == "spec.directoryService"
    assert (cel[0]["file"], cel[0]["line"]) == ("dir.yaml", 1)  # the values key that set it
    assert not [f for f in report["findings"] if f["ruleId"] == "RENDER"]  # said once
    assert "ldapUri: at least one LDAP server is needed when enabled" in cel[0]["message"]


def test_object_findings_point_at_the_values_line_that_set_the_field(helm, cwd):
    (cwd / "site.yaml").write_text(
        "clusterName: site\n"
        "extraObjects:\n"
        "  - apiVersion: v1\n"
        "    kind: ConfigMap\n"
        "    metadata: {name: x}\n"
        "    data:\n"
        "      a: 1\n"
        "compute:\n"
        "  nodes:\n"
        "    cpu:\n"
        "      definitions: [cpu-epyc]\n"
        "      s6:\n"
        "        ok: {type: oneshot, script: 'true'}\n"
    )
    code, report = run("site.yaml")
    assert code == 1, report
    (found,) = [f for f in report["findings"] if f["ruleId"] == "K8S"]
    assert (found["file"], found["line"], found["keyPath"]) == ("site.yaml", 7, "data.a")


def test_files_validated_in_parallel_report_as_one_after_another(helm, cwd):
    (cwd / "repo" / "prod").mkdir(parents=True)
    (cwd / "repo" / "a.yaml").write_text("compute:\n  nodes:\n    cpu: {definitions: [cpu-epyc]}\n")
    (cwd / "repo" / "prod" / "b.yaml").write_text("clusterName: 'bad name'\n")
    (cwd / "repo" / "prod" / "c.yaml").write_text("login: {replicas: -1}\n")
    sequential = run("repo", "-j", "1")
    parallel = run("repo", "-j", "3")
    assert sequential == parallel
    code, report = parallel
    assert code == 1
    assert [f["file"] for f in report["files"]] == ["repo/a.yaml", "repo/prod/b.yaml",
                                                     "repo/prod/c.yaml"]  # fmt: skip
    assert {f["file"] for f in report["findings"]} == {"repo/prod/b.yaml", "repo/prod/c.yaml"}


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("kubeconform", [True, False], ids=["kubeconform", "python"])
def test_a_directory_is_checked_in_one_kubernetes_run_and_each_error_names_its_file(
    helm, cwd, monkeypatch, kubeconform, jobs
):
    """Every file's rendered objects go through one kubeconform run (per worker); each
    object's error still names its own file and line, in file order."""
    if not kubeconform:
        monkeypatch.setenv("SUNKCTL_NO_KUBECONFORM", "1")
    bad = (
        "extraObjects:\n"
        "  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {n}}}, data: {{x: {v}}}}}\n"
    )
    (cwd / "repo").mkdir()
    (cwd / "repo" / "a.yaml").write_text(bad.format(n="first", v=1))
    (cwd / "repo" / "b.yaml").write_text("clusterName: fine\n")
    (cwd / "repo" / "c.yaml").write_text("clusterName: c\n" + bad.format(n="third", v="[1]"))
    code, report = run("repo", "-j", jobs)
    assert code == 1, report
    k8s = [
        (f["file"], f["line"], f["resource"]["name"])
        for f in report["findings"]
        if f["ruleId"] == "K8S"
    ]
    assert k8s == [("repo/a.yaml", 2, "first"), ("repo/c.yaml", 3, "third")]
    assert [f["file"] for f in report["files"]] == ["repo/a.yaml", "repo/b.yaml", "repo/c.yaml"]
    assert all("kubernetes" in f["checks"] for f in report["files"])
