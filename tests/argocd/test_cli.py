"""``sunkctl argocd gen`` end to end through Typer: output files, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sunk.argocd import schema
from sunk.cli.main import app

pytestmark = pytest.mark.unit

REPO_URL = "https://git.example.com/org/sunk.git"
SHA = "0123456789abcdef0123456789abcdef01234567"


def gen(root: Path, *args: str, values: tuple[str, ...] = ("slurm-a.yaml", "b.yaml")):
    argv = ["argocd", "gen", "--repo", REPO_URL, "--revision", SHA, "--cluster", "prod"]
    argv += ["--repo-root", str(root), "--out", str(root / "argocd")]
    for v in values:
        argv += ["-f", str(root / "examples" / v)]
    result = CliRunner().invoke(app, [*argv, *args])
    # Never a traceback: every failure is a clean exit with a message.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def read_tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_gen_writes_valid_manifests(fake_repo: Path) -> None:
    result = gen(fake_repo, "--extra-app", f"storage={fake_repo / 'deploy/storage'}@slurm-a")
    assert result.exit_code == 0, result.output
    out = fake_repo / "argocd"
    assert sorted(read_tree(out)) == [
        "apps/cert-manager.yaml",
        "apps/extra-storage.yaml",
        "apps/moco.yaml",
        "apps/slurm-b.yaml",
        "apps/slurm-slurm-a.yaml",
        "apps/sunk.yaml",
        "argocd-cm-patch.yaml",
        "root.yaml",
    ]
    for path in out.rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            assert schema.errors(doc) == [], path
    assert "wrote" in result.stderr
    assert result.stdout == ""  # reports go to stderr


def test_gen_is_byte_for_byte_repeatable(fake_repo: Path, tmp_path: Path) -> None:
    assert gen(fake_repo).exit_code == 0
    first = read_tree(fake_repo / "argocd")
    again = gen(fake_repo)
    assert again.exit_code == 0 and "up to date" in again.stderr
    assert read_tree(fake_repo / "argocd") == first


def test_check_mode_and_stale_files(fake_repo: Path) -> None:
    assert gen(fake_repo).exit_code == 0
    assert gen(fake_repo, "--check").exit_code == 0
    # Dropping a cluster: --check reports it, a real run removes only the generated file.
    (fake_repo / "argocd" / "apps" / "mine.yaml").write_text("kind: ConfigMap\n")
    check = gen(fake_repo, "--check", values=("b.yaml",))
    assert check.exit_code == 1 and "slurm-slurm-a.yaml" in check.stderr
    assert (fake_repo / "argocd" / "apps" / "slurm-slurm-a.yaml").exists()
    assert gen(fake_repo, values=("b.yaml",)).exit_code == 0
    assert not (fake_repo / "argocd" / "apps" / "slurm-slurm-a.yaml").exists()
    assert (fake_repo / "argocd" / "apps" / "mine.yaml").exists()


def test_overrides_and_appset(fake_repo: Path) -> None:
    result = gen(
        fake_repo,
        "--style",
        "appset",
        "--release-name",
        "b=gpu",
        "--slurm-namespace",
        "b=slurm-gpu",
        "--no-moco",
        "--auto-sync",
        "--prune",
        "--ignore-replicas",
    )
    assert result.exit_code == 0, result.output
    appset = yaml.safe_load((fake_repo / "argocd/apps/slurm-appset.yaml").read_text())
    values = [e["values"] for e in appset["spec"]["generators"][0]["list"]["elements"]]
    assert values[1]["release"] == "gpu" and values[1]["namespace"] == "slurm-gpu"
    assert not (fake_repo / "argocd/apps/moco.yaml").exists()


def test_git_generator(fake_repo: Path) -> None:
    result = gen(
        fake_repo,
        "--style",
        "appset",
        "--appset-generator",
        "git",
        "--git-values-glob",
        "examples/*.yaml",
        values=("slurm-a.yaml",),
    )
    assert result.exit_code == 0, result.output
    # b.yaml has no clusterName: the git generator cannot name it.
    bad = gen(
        fake_repo,
        "--style",
        "appset",
        "--appset-generator",
        "git",
        "--git-values-glob",
        "examples/*.yaml",
        values=("b.yaml",),
    )
    assert bad.exit_code == 2 and "needs clusterName" in bad.stderr


@pytest.mark.parametrize(
    ("setup", "args", "values", "code", "needle"),
    [
        (None, (), ("missing.yaml",), 2, "missing.yaml does not exist"),
        (None, (), (".",), 2, "is not a file"),
        ("bad.yaml:clusterName: [oops\n", (), ("bad.yaml",), 1, "bad.yaml:2:1: invalid YAML"),
        ("list.yaml:- a\n- b\n", (), ("list.yaml",), 1, "must be a YAML mapping"),
        (
            "dup.yaml:clusterName: slurm-a\n",
            (),
            ("slurm-a.yaml", "dup.yaml"),
            2,
            "duplicate Slurm cluster name 'slurm-a'",
        ),
        ("Bad_Name.yaml:{}\n", (), ("Bad_Name.yaml",), 2, "not a valid release name"),
        ("up.yaml:clusterName: Upper\n", (), ("up.yaml",), 2, "clusterName in"),
        (None, ("--repo", "not a url"), (), 2, "--repo: 'not a url' is not a Git repository URL"),
        (None, ("--repo", "ftp://host/x"), (), 2, "--repo"),
        (None, ("--cluster", "Prod!"), (), 2, "--cluster"),
        (None, ("--prune",), (), 2, "--prune only applies to automated sync"),
        (None, ("--release-name", "nosuch=x"), (), 2, "--release-name: no values file"),
        (None, ("--release-name", "b"), (), 2, "expected KEY=VALUE"),
        (None, ("--release-name", "b=slurm-a"), (), 2, "duplicate Slurm cluster name"),
        (None, ("--extra-app", "storage=deploy/nope"), (), 2, "is not a directory"),
        (None, ("--style", "fleet"), (), 2, "fleet"),
        (None, ("--git-values-glob", "x/*.yaml"), (), 2, "--git-values-glob needs --style"),
        (None, ("--out", "/"), (), 2, "--out: / is outside the repository root"),
        (None, ("--sunk-values", "/nonexistent/sunk.yaml"), (), 2, "--sunk-values"),
        (None, ("--destination-server", "kubernetes"), (), 2, "--destination-server"),
        (None, ("--moco-version", ""), (), 2, "--moco-version"),
    ],
)
def test_bad_input_is_one_clean_line(
    fake_repo: Path,
    setup: str | None,
    args: tuple[str, ...],
    values: tuple[str, ...],
    code: int,
    needle: str,
) -> None:
    if setup:
        name, _, text = setup.partition(":")
        (fake_repo / "examples" / name).write_text(text)
    result = gen(fake_repo, *args, values=values or ("slurm-a.yaml", "b.yaml"))
    assert result.exit_code == code, result.output
    assert needle in result.stderr, result.stderr
    if code != 2 or "Usage" not in result.stderr:  # Click's own usage errors span lines
        assert result.stderr.startswith("sunkctl argocd gen: error: ")
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (fake_repo / "argocd").exists()


def test_help_lists_exit_codes() -> None:
    result = CliRunner().invoke(app, ["argocd", "gen", "--help"])
    assert result.exit_code == 0
    assert "Exit codes" in result.output and "--extra-app" in result.output


def test_output_passes_the_repos_yamllint_rules(fake_repo: Path, repo: Path) -> None:
    from yamllint import config, linter

    assert gen(fake_repo, "--style", "appset").exit_code == 0
    assert gen(fake_repo).exit_code == 0
    conf = config.YamlLintConfig(file=str(repo / ".yamllint.yaml"))
    for path in sorted((fake_repo / "argocd").rglob("*.yaml")):
        problems = list(linter.run(path.read_text(), conf, str(path)))
        assert problems == [], (path, [str(p) for p in problems])


def test_repo_root_defaults_to_the_git_checkout(
    fake_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fake_repo / ".git").mkdir()
    (fake_repo / "examples" / "sub").mkdir()
    monkeypatch.chdir(fake_repo / "examples" / "sub")
    argv = ["argocd", "gen", "--repo", REPO_URL, "--revision", SHA, "--cluster", "prod"]
    result = CliRunner().invoke(app, [*argv, "-f", "../slurm-a.yaml", "--out", "../../argocd"])
    assert result.exit_code == 0, result.output
    root = yaml.safe_load((fake_repo / "argocd" / "root.yaml").read_text())
    assert root["spec"]["source"]["path"] == "argocd/apps"
    child = yaml.safe_load((fake_repo / "argocd" / "apps" / "slurm-slurm-a.yaml").read_text())
    assert child["spec"]["source"]["helm"]["valueFiles"] == ["../../examples/slurm-a.yaml"]


def test_sunk_values_and_files_outside_the_repo(fake_repo: Path, tmp_path: Path) -> None:
    (fake_repo / "sunk-values.yaml").write_text("replicas: 2\n")
    result = gen(fake_repo, "--sunk-values", str(fake_repo / "sunk-values.yaml"))
    assert result.exit_code == 0, result.output
    sunk = yaml.safe_load((fake_repo / "argocd/apps/sunk.yaml").read_text())
    assert sunk["spec"]["source"]["helm"]["valueFiles"] == ["../../sunk-values.yaml"]

    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("clusterName: far\n")
    argv = ["argocd", "gen", "--repo", REPO_URL, "--revision", SHA, "--cluster", "prod"]
    argv += ["--repo-root", str(fake_repo), "-f", str(outside), "--out", str(fake_repo / "o")]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert "elsewhere.yaml is outside the repository root" in result.stderr


API = "https://10.0.0.1:6443"


def test_root_destination_and_cluster_secret_for_a_cluster_not_argocds_own(
    fake_repo: Path,
) -> None:
    result = gen(
        fake_repo,
        "--destination-server",
        API,
        "--root-destination-server",
        API,
        "--cluster-secret",
    )
    assert result.exit_code == 0, result.output
    out = fake_repo / "argocd"
    root = yaml.safe_load((out / "root.yaml").read_text())
    assert root["spec"]["destination"] == {"server": API, "namespace": "argocd"}
    child = yaml.safe_load((out / "apps/sunk.yaml").read_text())
    assert child["spec"]["destination"]["server"] == API
    text = (out / "cluster-secret.yaml").read_text()
    assert "never" in text and "commit credentials" in text
    secret = yaml.safe_load(text)
    assert secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "cluster"
    assert secret["metadata"]["namespace"] == "argocd"
    assert secret["stringData"]["name"] == "prod"
    assert secret["stringData"]["server"] == API
    config = json.loads(secret["stringData"]["config"])
    assert config == {"bearerToken": "<fill in>", "tlsClientConfig": {"caData": "<fill in>"}}
    # The root Application syncs apps/ only: the template never reaches the cluster via Git.
    assert root["spec"]["source"]["path"].endswith("apps")


def test_root_destination_defaults_to_argocds_own_cluster(fake_repo: Path) -> None:
    assert gen(fake_repo).exit_code == 0
    root = yaml.safe_load((fake_repo / "argocd/root.yaml").read_text())
    assert root["spec"]["destination"]["server"] == "https://kubernetes.default.svc"
    assert not (fake_repo / "argocd/cluster-secret.yaml").exists()
    assert not (fake_repo / "argocd/project.yaml").exists()


def test_cluster_secret_needs_a_server(fake_repo: Path) -> None:
    result = gen(fake_repo, "--cluster-secret")
    assert result.exit_code == 2, result.output
    assert "--cluster-secret needs --destination-server" in result.stderr
    result = gen(fake_repo, "--root-destination-server", "http://x")
    assert result.exit_code == 2
    assert "--root-destination-server" in result.stderr


@pytest.mark.parametrize("style", ["app-of-apps", "appset"])
def test_app_project_allows_exactly_what_the_apps_use(fake_repo: Path, style: str) -> None:
    result = gen(
        fake_repo,
        "--app-project",
        "--project",
        "sunk",
        "--destination-server",
        API,
        "--style",
        style,
    )
    assert result.exit_code == 0, result.output
    out = fake_repo / "argocd"
    project = yaml.safe_load((out / "project.yaml").read_text())
    assert project["kind"] == "AppProject"
    assert project["metadata"] == {
        "name": "sunk",
        "namespace": "argocd",
        "labels": project["metadata"]["labels"],
    }
    spec = project["spec"]
    assert spec["sourceRepos"][0] == REPO_URL
    assert "https://charts.jetstack.io" in spec["sourceRepos"]
    assert {"server": "https://kubernetes.default.svc", "namespace": "argocd"} in spec[
        "destinations"
    ]
    assert {"server": API, "namespace": "sunk-system"} in spec["destinations"]
    # Every generated Application is in the project and allowed by it.
    for path in (out / "apps").glob("*.yaml"):
        app = yaml.safe_load(path.read_text())
        body = app["spec"]["template"]["spec"] if app["kind"] == "ApplicationSet" else app["spec"]
        assert body["project"] == "sunk"
        dest = dict(body["destination"])
        if "{{" in dest["namespace"]:
            dest["namespace"] = "*"
        assert dest in spec["destinations"], path
        assert body["source"]["repoURL"] in spec["sourceRepos"], path
    assert f"kubectl apply -f {out.name}/project.yaml" in (out / "root.yaml").read_text()


def test_an_output_that_cannot_be_written_is_exit_3(fake_repo: Path) -> None:
    (fake_repo / "argocd").write_text("a file where the output directory goes\n")
    result = gen(fake_repo)
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sunkctl argocd gen: error: --out: cannot write {fake_repo / 'argocd'}")
