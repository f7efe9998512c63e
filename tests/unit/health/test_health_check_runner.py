"""The runner's stock checks and site scripts against made-up system files
(`pytest -k health_check`); on real slurmd and slurmctld in tests/slurm/test_health_checks.py."""

from __future__ import annotations

import json
import os

import pytest

from sunk.health import record, runner
from sunk.health.runner import Config, Node, RunnerError, run_checks
from sunk.models.values import HealthCheck
from sunk.slurmconf import health


def proc_entry(root, pid: int, uid: int, name: str) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "status").write_text(f"Name:\t{name}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")


def test_health_check_disk_free_by_size_and_percentage(tmp_path):
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    node = Node("n", root=tmp_path)
    assert runner.check_disk_free(node, {"/": 1}).ok
    failed = runner.check_disk_free(node, {"/": free * 2, "/missing": "1%"})
    assert not failed.ok and "/ has" in failed.detail and "/missing:" in failed.detail
    assert not runner.check_disk_free(node, {"/": "100%"}).ok or free == 0


def test_health_check_mounts_reads_mountinfo_with_escapes(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(
        "22 1 0:21 / / rw - overlay overlay rw\n"
        "30 22 0:40 / /mnt/shared\\040data rw - nfs4 server:/x rw\n"
    )
    node = Node("n", root=tmp_path)
    assert runner.check_mounts(node, ["/mnt/shared data", "/"]).ok
    result = runner.check_mounts(node, ["/mnt/shared data", "/scratch/"])
    assert not result.ok and result.detail == "not mounted: /scratch/"


def test_health_check_idle_processes_and_memory_only_on_an_idle_node(tmp_path):
    proc_entry(tmp_path, 1, 0, "tini")
    proc_entry(tmp_path, 7, 1001, "python")
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/memory.stat").write_text("anon 3000\nfile 99999\nshmem 1000\n")
    config = Config(stock={"idle-processes": 1000, "idle-memory": 3500})
    idle = Node("n", frozenset({"IDLE"}), root=tmp_path)
    results = run_checks(config, idle, "periodic")
    assert (
        not results["idle-processes"].ok and "uid 1001: python" in results["idle-processes"].detail
    )
    assert (
        not results["idle-memory"].ok and "in use on an idle node" in results["idle-memory"].detail
    )
    busy = Node("n", frozenset({"MIXED"}), root=tmp_path)
    assert run_checks(config, busy, "periodic") == {}
    assert run_checks(config, idle, "prolog") == {}  # the job's own processes are coming


def test_health_check_idle_memory_reads_cgroup_v1_too(tmp_path):
    (tmp_path / "sys/fs/cgroup/memory").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/memory/memory.stat").write_text("total_rss 10\ntotal_shmem 5\n")
    assert runner.cgroup_memory_in_use(Node("n", root=tmp_path)) == 15
    with pytest.raises(RunnerError):
        runner.cgroup_memory_in_use(Node("n", root=tmp_path / "none"))


def test_health_check_gpu_count_against_gres(tmp_path, monkeypatch):
    monkeypatch.setattr(runner.shutil, "which", lambda _: None)  # no nvidia-smi here
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia1"):
        (tmp_path / "dev" / name).touch()
    assert runner.gres_gpus("gpu:h100:2(S:0-1),nic:4") == 2
    assert runner.gres_gpus("gpu:h100:8(S:0,1)") == 8  # a comma inside the socket list
    assert runner.check_gpu_count(Node("n", gres="gpu:h100:2(S:0)", root=tmp_path), True).ok
    lost = runner.check_gpu_count(Node("n", gres="gpu:h100:8", root=tmp_path), True)
    assert lost.detail == "2 GPU device(s) in /dev, GRES says 8"


def test_health_check_site_scripts_pass_fail_and_time_out(tmp_path):
    config = Config(
        scripts={
            "a-ok": "exit 0\n",
            "b-py": "#!/usr/bin/env python3\nprint('fabric slow: 3 GB/s')\nraise SystemExit(3)\n",
            "c-slow": "sleep 5\n",
            "d-silent": "exit 4\n",
        },
        timeout=1,
    )
    results = run_checks(config, Node("n"), "periodic")
    assert results["a-ok"].ok
    assert results["b-py"].detail == "fabric slow: 3 GB/s"
    assert results["c-slow"].detail == "no answer within 1s"
    assert results["d-silent"].detail == "exit status 4"


def test_health_check_config_is_rendered_in_bytes_and_read_back(tmp_path):
    hc = HealthCheck(
        interval=60,
        nodeState=["IDLE", "CYCLE"],
        diskFree={"/tmp": "5%", "/": "1.5Gi"},
        idleMemory="512Mi",
        scripts={"fabric": "exit 0"},
    )
    data = json.loads(health.render_checks(hc))
    assert data["stock"] == {
        "disk-free": {"/": 1610612736, "/tmp": "5%"},
        "idle-memory": 536870912,
    }
    path = tmp_path / "checks.json"
    path.write_text(health.render_checks(hc))
    assert Config.load(path).names == {"disk-free", "idle-memory", "fabric"}
    assert health.slurm_settings(hc) == {
        "HealthCheckProgram": "/usr/local/bin/sunk-health",
        "HealthCheckInterval": 60,
        "HealthCheckNodeState": ["IDLE", "CYCLE"],
    }
    assert health.slurm_settings(HealthCheck(interval=60)) == {}  # no check: nothing to run
    path.write_text('{"stock": {"bogus": 1}}')
    with pytest.raises(RunnerError, match="unknown checks"):
        Config.load(path)


def test_health_check_settings_reach_slurm_conf_the_dispatchers_and_the_slurmd_pod():
    from tests.unit.operator.test_shared_volumes import cluster as pod_cluster
    from tests.unit.operator.test_shared_volumes import container, nodeset, slurmd_pod
    from tests.unit.test_slurmconf import cluster, conf_lines, render

    spec = cluster(
        healthCheck={"interval": 300, "nodeState": ["IDLE", "CYCLE"], "prolog": True,
                     "mounts": ["/data"]},
        slurmConfig={"SchedulerParameters": "bf_continue"},
    )  # fmt: skip
    rendered = render(spec)
    lines = conf_lines(rendered)
    assert "HealthCheckProgram=/usr/local/bin/sunk-health" in lines
    assert "HealthCheckInterval=300" in lines and "HealthCheckNodeState=IDLE,CYCLE" in lines
    assert "SchedulerParameters=nohold_on_prolog_fail,bf_continue" in lines
    assert "Prolog=/etc/slurm/prolog.sh" in lines
    assert "--from epilog" not in rendered.files.get("epilog.sh", "")
    assert "--from prolog" in rendered.files["prolog.sh"]
    assert json.loads(rendered.files[health.FILE])["stock"] == {"mounts": ["/data"]}
    # no check configured: nothing of it anywhere
    plain = render(cluster(healthCheck={"interval": 300, "prolog": True}))
    assert health.FILE not in plain.files and "sunk-health" not in plain.files["prolog.sh"]
    assert not any(ln.startswith("HealthCheck") for ln in conf_lines(plain))

    pod = slurmd_pod(pod_cluster(healthCheck={"mounts": ["/data"], "epilog": True}), nodeset())
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == health.VOLUME)
    assert volume["configMap"]["items"] == [{"key": health.FILE, "path": "checks.json"}]
    mounts = {m["mountPath"]: m for m in container(pod["spec"], "slurmd")["volumeMounts"]}
    assert mounts["/etc/sunk/health"]["name"] == health.VOLUME
    assert mounts["/etc/slurm/epilog.sh"]["subPath"] == "epilog.sh"


def test_health_check_changes_roll_no_controller_unless_slurm_conf_changes():
    """The runner reads its checks at each run (the slurmd Pods mount the file as a directory,
    so the kubelet updates it): a changed check keeps the config hash the controller and login
    Pods carry; a changed interval is a slurm.conf change."""
    from tests.unit.test_slurmconf import cluster, render

    def rendered(**hc):
        return render(cluster(healthCheck={"interval": 300, "mounts": ["/data"], **hc}))

    base = rendered()
    assert rendered(mounts=["/data", "/scratch"]).config_hash == base.config_hash
    assert rendered(scripts={"x": "exit 0"}).config_hash == base.config_hash
    assert rendered(interval=600).config_hash != base.config_hash


@pytest.mark.parametrize(("runner_exit", "prolog_exit"), [(0, 0), (1, 1), (2, 0)])
def test_health_check_fails_the_prolog_only_on_a_failed_check(tmp_path, runner_exit, prolog_exit):
    """Exit 1 (a check failed, the node drained) fails the prolog; exit 2 (the runner could not
    judge) lets the job run rather than requeue it on every node."""
    import subprocess

    from sunk.slurmconf.scripts import dispatcher

    prolog = tmp_path / "prolog.sh"
    prolog.write_text(dispatcher("prolog", False, True))
    fake = tmp_path / "sunk-health"
    fake.write_text(f"#!/bin/sh\nexit {runner_exit}\n")
    fake.chmod(0o755)
    (tmp_path / "prolog.d").mkdir()
    env = {"PATH": "/usr/bin:/bin", "SUNK_HEALTH": str(fake),
           "SUNK_SCRIPTS_DIR": str(tmp_path / "prolog.d")}  # fmt: skip
    assert subprocess.run(["sh", str(prolog)], env=env, check=False).returncode == prolog_exit


def test_health_check_record_keeps_the_sites_extra_and_idle_checks_not_run(monkeypatch):
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(runner, "scontrol", lambda *a: calls.append(a) or "")
    first = {"disk-free": runner.Result(True, seconds=0.1), "idle-processes": runner.Result(False)}
    runner.keep_record(Node("n", extra='{"rack":"r1"}'), first, {"disk-free", "idle-processes"})
    assert calls[0][:2] == ("update", "NodeName=n") and " " not in calls[0][2]
    extra = calls[0][2].removeprefix("Extra=")
    assert json.loads(extra)["rack"] == "r1"
    # a busy node's run: idle-processes did not run and keeps its last result; a check no
    # longer configured goes
    runner.keep_record(
        Node("n", extra=extra), {"mounts": runner.Result(True)}, {"idle-processes", "mounts"}
    )
    kept = record.parse(calls[1][2].removeprefix("Extra="))
    assert kept and {n: c.ok for n, c in kept.checks.items()} == {
        "idle-processes": False,
        "mounts": True,
    }
    runner.keep_record(Node("n", extra="gpu=a100"), first, {"disk-free"})  # the site's text
    assert len(calls) == 2


def test_health_check_results_carry_their_duration(tmp_path):
    config = Config(scripts={"slow": "sleep 0.2"})
    results = run_checks(config, Node("n"), "periodic")
    assert results["slow"].ok and results["slow"].seconds >= 0.2


def test_health_check_idle_failure_is_dropped_when_a_job_started_meanwhile():
    results = {
        "idle-processes": runner.Result(False, "1 user process(es) left"),
        "idle-memory": runner.Result(True),
        "marker": runner.Result(False, "x"),
    }
    busy = Node("n", states=frozenset({"ALLOCATED"}))
    assert runner.without_raced_idle_checks(results, lambda: busy) == {
        "idle-memory": runner.Result(True),
        "marker": runner.Result(False, "x"),
    }
    idle = Node("n", states=frozenset({"IDLE"}))
    assert runner.without_raced_idle_checks(results, lambda: idle) == results
    # no idle check failed: the node is not read again
    passed = {"idle-memory": runner.Result(True), "marker": runner.Result(False, "x")}
    assert runner.without_raced_idle_checks(passed, lambda: 1 / 0) == passed
