"""The hostile-input corpus (tests/hostile.py) against the three gates: `sunkctl validate`
(file:line, key path, exit 1, no traceback), `sunkctl render` (refused before helm), and the
renderer's own guard (sunk.slurmconf.guard) for inputs that got past the models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput, RenderError, render_all
from sunk.validate import Options, validate
from tests.hostile import LINE_BREAKERS, SPACE, cases

CASES = cases()
EP = Endpoints("ctl-0", "10.0.0.1", "dbd", "10.0.0.2")
SLURM_FILES = (
    "slurm.conf",
    "sssd.conf",
    "cgroup.conf",
    "mpi.conf",
    "gres.conf",
    "slurmdbd.conf",
    "plugstack.conf",
    "job_submit.lua",
    "cli_filter.lua",
)


def test_corpus_is_large_and_names_are_unique():
    assert len(CASES) >= 200
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for case in CASES:
        # JSON is YAML: every payload is escaped, every key on its own line.
        (root / f"{case.name}.yaml").write_text(json.dumps(case.values, indent=2) + "\n")
    return root


def test_validate_reports_every_case_at_its_line_and_key_path(corpus_dir, monkeypatch):
    monkeypatch.chdir(corpus_dir)
    report = validate(Options(paths=["."], render=False))
    assert len(report.files) == len(CASES)
    for case in CASES:
        file = f"{case.name}.yaml"
        errors = [f for f in report.errors if f.file == file]
        located = [
            f for f in errors if f.line is not None and (f.key_path or "").startswith(case.path)
        ]
        assert located, f"{case.name}: no error at {case.path}: {errors}"
        text = (corpus_dir / file).read_text().splitlines()
        # The line is the one holding the offending key or value.
        assert all(0 < f.line <= len(text) for f in located)


def test_validate_cli_exit_1_and_no_traceback(corpus_dir, monkeypatch):
    monkeypatch.chdir(corpus_dir)
    result = CliRunner().invoke(app, ["validate", "--no-render", "."])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    for case in CASES:
        assert re.search(rf"^{re.escape(case.name)}\.yaml:\d+:\d+  ", result.stdout, re.M), case


def test_render_refuses_every_case_before_helm(corpus_dir, monkeypatch):
    # No helm on PATH: render must refuse from the values alone.
    monkeypatch.setenv("PATH", "/nonexistent")
    runner = CliRunner()
    for case in CASES:
        file = corpus_dir / f"{case.name}.yaml"
        result = runner.invoke(app, ["render", "-f", str(file)])
        assert result.exit_code == 1, (case.name, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output
        assert f"{file}:" in result.output and case.path.split("[")[0] in result.output


def _inputs(case_inject) -> ClusterInputs:
    spec = SlurmClusterSpec.model_validate(
        {"clusterName": "c", "compute": {"pyxis": {"enabled": True}}}
    )
    template = {"spec": {"containers": [{"name": "slurmd", "resources": {"limits": {"cpu": "4"}}}]}}
    nodeset = NodeSetInput("g", NodeSetSpec(clusterName="c", template=template, gresGpu="8"))
    nodesets = [nodeset]
    case_inject(spec, nodesets)
    return ClusterInputs(spec, tuple(nodesets), EP)


@pytest.mark.parametrize("case", [c for c in CASES if c.inject], ids=lambda c: c.name)
def test_renderer_guard_refuses_injections_past_the_models(case):
    inputs = _inputs(case.inject)
    with pytest.raises(RenderError) as caught:
        render_all(inputs)
    message = str(caught.value)
    assert any(message.startswith(f) for f in (*SLURM_FILES, "slurmd --conf")), message


@pytest.mark.parametrize("payload", [*LINE_BREAKERS.values(), *SPACE.values()])
def test_renderer_guard_refuses_external_host(payload):
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    endpoints = Endpoints("ctl-0", "10.0.0.1", "dbd", "10.0.0.2", storage_host=payload)
    with pytest.raises(RenderError, match=r"^slurmdbd.conf: accounting.external.host: "):
        render_all(ClusterInputs(spec, (), endpoints))


def slurm_pairs(line: str) -> list[tuple[str, str]]:
    """A line split the way Slurm's parser splits it (parse_config.c's key/value regex)."""
    pattern = re.compile(r'\s*([A-Za-z0-9_.]+)=("([^"]*)"|(\S+))(\s|$)')
    pairs, pos = [], 0
    while pos < len(line.rstrip()):
        match = pattern.match(line, pos)
        assert match, f"unparseable at {line[pos:]!r}"
        pairs.append(
            (match.group(1), match.group(3) if match.group(3) is not None else match.group(4))
        )
        pos = match.end()
    return pairs


def test_a_space_is_quoted_so_slurm_reads_one_value():
    spec = SlurmClusterSpec.model_validate(
        {
            "clusterName": "c",
            "slurmConfig": {"MailProg": "/usr/bin/mail AuthType=auth/none"},
            "compute": {
                "partitions": [
                    {
                        "name": "p",
                        "nodeSets": ["ALL"],
                        "config": {"MaxTime": "INFINITE AllowAccounts=root"},
                    }
                ]
            },
        }
    )
    out = render_all(ClusterInputs(spec, (), EP)).files["slurm.conf"]
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert 'MailProg="/usr/bin/mail AuthType=auth/none"' in lines
    part = next(line for line in lines if line.startswith("PartitionName=p "))
    assert dict(slurm_pairs(part))["MaxTime"] == "INFINITE AllowAccounts=root"
    assert "AllowAccounts" not in dict(slurm_pairs(part))
    keys = [k.lower() for line in lines for k, _ in slurm_pairs(line)]
    assert keys.count("authtype") == 1


def test_owned_keys_are_compared_case_insensitively():
    spec = SlurmClusterSpec.model_validate(
        {
            "clusterName": "c",
            "slurmConfig": {"authtype": "auth/none", "schedulertype": "sched/builtin"},
            "accounting": {"config": {"storagehost": "evil"}},
            "compute": {
                "partitions": [
                    {"name": "p", "nodeSets": ["ALL"], "config": {"nodes": "x", "maxtime": "5"}}
                ]
            },
        }
    )
    out = render_all(ClusterInputs(spec, (), EP))
    conf = out.files["slurm.conf"].lower()
    assert "auth/none" not in conf and "authtype=auth/munge" in conf
    assert conf.count("schedulertype=") == 1 and "schedulertype=sched/builtin" in conf
    assert "storagehost=evil" not in out.files["slurmdbd.conf"].lower()
    part = next(line for line in out.files["slurm.conf"].splitlines() if "PartitionName=p " in line)
    assert dict(slurm_pairs(part))["Nodes"] == "ALL" and "nodes" not in dict(slurm_pairs(part))
    assert "slurmConfig.authtype: managed by the operator; the value is ignored" in out.warnings
    assert "compute.partitions[0].config.nodes: set by the operator; the value is ignored" in (
        out.warnings
    )


def test_dynamic_feature_from_node_label_is_guarded():
    from sunk.slurmconf.guard import UnsafeConfigError
    from sunk.slurmconf.registration import registration

    nodeset = NodeSetInput(
        "g",
        NodeSetSpec(clusterName="c", features={"dynamicFeatures": {"ib/pod": {"prefix": "p-"}}}),
    )
    assert registration(nodeset, "4Gi", {"ib/pod": "7"}) == "Features=g,p-7"
    with pytest.raises(
        UnsafeConfigError, match=r"^slurmd --conf: NodeSet g: spec\.features\.Features: .* a space"
    ):
        registration(nodeset, "4Gi", {"ib/pod": "7 CPUs=9999"})
