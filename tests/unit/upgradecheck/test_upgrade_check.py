"""`sunkctl upgrade-check`: the plan from a running release's objects and the next values, both
rendered by the real chart here (the live read through kubectl against a real API server is in
the e2e tier's Slurm upgrade)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sunk.chartio.helm import Release, template
from sunk.cli.main import app
from sunk.cli.upgrade_check_cmd import _rendered_side
from sunk.operator import names
from sunk.upgradecheck.plan import Side, plan

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "minimal-cpu.yaml"
NS = "tenant-slurm"
NEXT = "0.1.0-slurm26.05"
SLURM_IMAGES = ("controller", "accounting", "rest", "login", "compute", "directoryService")


def side(helm: str, tmp_path: Path, extra: dict | None = None) -> Side:
    files = [EXAMPLE]
    if extra:
        path = tmp_path / f"extra-{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(yaml.safe_dump(extra))
        files.append(path)
    return _rendered_side(template(Release(namespace=NS, helm=helm), files), NS)


def slurmd_pod(name: str, locked: bool = False) -> dict:
    """A slurmd Pod as the operator and the lock hook leave it: the lock's state on the Pod."""
    annotations = {names.ANN_LOCK: "locked" if locked else "false"}
    meta = {"name": name, "labels": {names.LABEL_NODESET: "cpu"}, "annotations": annotations}
    return {"metadata": meta, "spec": {"nodeName": f"node-{name}"}}


# The Nodes, where the lock hook names the jobs holding each (7 and a strict 9 on cpu-0's).
NODES = [{"metadata": {"name": "node-cpu-0", "annotations": {
    names.ANN_LOCK: "locked_strict", f"{names.GROUP}/lock-jobs": "7,9:strict"}}}]  # fmt: skip


def test_upgrade_check_the_same_values_change_nothing(helm, tmp_path):
    live = side(helm, tmp_path)
    result = plan(live, side(helm, tmp_path), [slurmd_pod("cpu-0")])
    assert result.empty, result.as_dict()


def test_slurm_upgrade_check_lists_slurms_order_and_every_restart_and_drain(helm, tmp_path):
    live = side(helm, tmp_path)
    new = side(helm, tmp_path, {key: {"image": {"tag": NEXT}} for key in SLURM_IMAGES})
    result = plan(live, new, [slurmd_pod("cpu-0", locked=True), slurmd_pod("cpu-1")], NODES)
    steps = result.releases
    assert [s.split(" 24.11")[0] for s in steps] == [
        "slurmdbd", "slurmctld", "slurmrestd", "the login Pods", "slurmd of NodeSet cpu",
    ], steps  # fmt: skip
    assert "converts the accounting database" in steps[0]
    assert "once slurmdbd runs 26.05" in steps[1]
    restarted = [line.split(":")[0] for line in result.restarts]
    assert restarted == ["accounting", "controller", "rest", "login"], result.restarts
    assert all(NEXT in line and "rolls" in line for line in result.restarts)
    (drain,) = result.drains
    assert "every slurmd Pod replaced (cpu-0 (job 7,9 holds it), cpu-1)" in drain
    assert "spec.controller.image.tag: 0.1.0-slurm24.11 → 0.1.0-slurm26.05" in "\n".join(
        result.changes
    )


def test_upgrade_check_a_partition_change_restarts_the_control_plane_not_the_slurmds(
    helm, tmp_path
):
    live = side(helm, tmp_path)
    part = {"name": "batch", "nodeSets": ["ALL"], "default": True, "config": {"MaxTime": "1:00:00"}}
    new = side(helm, tmp_path, {"compute": {"partitions": [part]}})
    result = plan(live, new, [slurmd_pod("cpu-0")])
    assert result.files == [
        "slurm.conf changes (the control-plane Pods roll; slurmds read it again from slurmctld)"
    ]
    assert any(line.startswith("controller: ") and "the Slurm configuration changes" in line
               for line in result.restarts), result.restarts  # fmt: skip
    assert not result.releases and not result.drains


def test_upgrade_check_scale_down_and_a_deleted_node_group_name_their_pods(helm, tmp_path):
    live = side(helm, tmp_path)
    pods = [slurmd_pod("cpu-0", locked=True), slurmd_pod("cpu-1")]
    scaled = side(helm, tmp_path, {"compute": {"nodes": {"cpu": {"replicas": 1}}}})
    down = plan(live, scaled, pods, NODES)
    (line,) = down.drains
    assert line.startswith("NodeSet cpu scales 2 → 1: 1 slurmd Pod(s) removed"), line
    assert "cpu-0 (job 7,9 holds it)" in line
    assert not down.restarts, "scaling a NodeSet restarts nothing in the control plane"

    gone = Side(live.name, NS, live.cluster, {})
    deleted = plan(live, gone, pods)
    assert "NodeSet cpu: deleted" in deleted.changes
    assert any("it stays until no job names its partition" in d for d in deleted.drains)


def test_upgrade_check_live_objects_the_renderer_refuses_name_where(helm, tmp_path):
    live = side(helm, tmp_path)
    broken = Side(live.name, NS, {**live.cluster, "clusterName": 7}, live.nodesets)
    with pytest.raises(Exception, match=r"the live SlurmCluster minimal: clusterName: "):
        plan(broken, live)


def invoke(*args: str):
    return CliRunner().invoke(app, ["upgrade-check", *args])


def test_upgrade_check_refuses_a_slurmd_newer_than_slurmctld_skew(helm, tmp_path):
    values = tmp_path / "skew.yaml"
    values.write_text(yaml.safe_dump({"compute": {"image": {"tag": NEXT}}}))
    result = invoke("-f", str(EXAMPLE), "-f", str(values), "--helm", helm)
    assert result.exit_code == 1, result.output
    assert "SUNK043" in result.output and "skew.yaml" in result.output


def test_upgrade_check_without_kubectl_is_a_tool_failure(helm, tmp_path):
    result = invoke("-f", str(EXAMPLE), "--helm", helm, "--kubectl", str(tmp_path / "kubectl"))
    assert result.exit_code == 3, result.output
    assert "kubectl" in result.output and "not found" in result.output
    assert "Traceback" not in result.output


def test_upgrade_check_a_missing_values_file_is_a_usage_error():
    result = invoke("-f", "/nonexistent/values.yaml")
    assert result.exit_code == 2 and "no such file" in result.output, result.output
