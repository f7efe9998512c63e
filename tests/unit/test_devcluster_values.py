"""`sunkctl dev up -f VALUES`: the user's values files apply in order and this machine's
overlay after them, so changing values on the demo cluster keeps what makes it run here; the
demo prints how (a plain `helm upgrade -f VALUES` swapped MariaDB for an image that cannot be
pulled here)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.devenv import deploy, devcluster


def test_dev_values_the_last_file_that_names_the_cluster_wins(tmp_path: Path):
    a, b, c = (tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml"))
    a.write_text("clusterName: first\n")
    b.write_text("compute: {}\n")
    c.write_text("clusterName: second\n")
    assert devcluster.cluster_name([a, b]) == "first"
    assert devcluster.cluster_name([a, b, c]) == "second"
    assert devcluster.cluster_name([b]) == "slurm"


def test_dev_values_hint_names_the_overlay_and_the_command():
    hint = devcluster.change_values_hint([Path("examples/minimal-cpu.yaml").resolve()])
    overlay = "tools/sunk/devenv/values/real-nodes.yaml"
    assert deploy.OVERLAY.resolve().as_posix().endswith(overlay)
    assert "sunkctl dev up -f examples/minimal-cpu.yaml -f YOUR-VALUES.yaml" in hint
    assert f"-f {overlay}" in hint


def test_dev_values_reach_helm_in_order_with_the_overlay_last(tmp_path: Path, monkeypatch):
    """What `sunkctl dev up -f A -f B` hands helm, on a cluster that is already up."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("clusterName: demo\n")
    b.write_text("compute: {}\n")
    calls: list[tuple[str, ...]] = []

    class Running:
        kubeconfig = tmp_path / "kubeconfig"
        nodes = ("n1", "n2")

        def detach(self) -> None:
            pass

    monkeypatch.setattr(devcluster, "_running_cluster", lambda workdir, say: Running())
    monkeypatch.setattr(
        deploy.SlurmDeployment, "helm", lambda self, *args, **kw: calls.append(args)
    )
    monkeypatch.setattr(deploy.SlurmDeployment, "wait_ready", lambda self, nodes: None)
    monkeypatch.setattr(deploy.SlurmDeployment, "login", lambda self, *cmd: "n1\nn2\n")
    monkeypatch.setattr(deploy.SlurmDeployment, "shell_command", lambda self: "kubectl exec ...")
    result = CliRunner().invoke(
        app, ["dev", "up", "-f", str(a), "-f", str(b), "--dir", str(tmp_path / "dev")]
    )
    assert result.exit_code == 0, result.output
    slurm = next(c for c in calls if "charts/slurm" in " ".join(c))
    files = [slurm[i + 1] for i, arg in enumerate(slurm) if arg == "-f"]
    assert files == [str(a), str(b), str(deploy.OVERLAY)]
    assert "sunkctl dev up -f" in result.output and "YOUR-VALUES.yaml" in result.output
