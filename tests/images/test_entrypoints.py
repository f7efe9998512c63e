"""The image entrypoints, run with bash in dry-run mode: no container, no Slurm, no root."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.images.conftest import closed_port

SETPRIV = ["setpriv", "--reuid={u}", "--regid={u}", "--init-groups", "--"]


def as_user(user: str, *argv: str) -> list[str]:
    return [a.format(u=user) for a in SETPRIV] + list(argv)


def cgroup_v2(tmp_path: Path, memory: str, cpu: str) -> Path:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "memory.max").write_text(memory + "\n")
    (root / "cpu.max").write_text(cpu + "\n")
    return root


def meminfo(tmp_path: Path, kib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {kib} kB\nMemFree:        1000 kB\n")
    return path


# --------------------------------------------------------------------------- slurmd


def slurmd_env(port: int, **extra: str) -> dict[str, str]:
    return {"SUNK_CONTROLLER": f"127.0.0.1:{port}", "SUNK_CONTROLLER_TIMEOUT": "2", **extra}


def conf_of(argv: list[str]) -> str:
    return argv[argv.index("--conf") + 1]


def test_slurmd_uses_the_rendered_registration_plus_node_features(entrypoint, tcp_listener):
    conf = "Features=gpu,h100 Gres=gpu:h100:8 CPUs=16 RealMemory=1000"
    res = entrypoint(
        "slurmd",
        env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF=conf, SUNK_NODE_FEATURES="rack-1,gpu"),
    )
    assert res.rc == 0, res.stderr
    assert res.exec_argv == [
        "slurmd", "-D", "-Z",
        "--conf-server", f"127.0.0.1:{tcp_listener}",
        "--conf", "Features=gpu,h100,rack-1 Gres=gpu:h100:8 CPUs=16 RealMemory=1000",
    ]  # fmt: skip


def test_slurmd_adds_features_when_the_registration_has_none(entrypoint, tcp_listener):
    res = entrypoint(
        "slurmd",
        env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=4", SUNK_NODE_FEATURES="a,b,a"),
    )
    assert res.rc == 0, res.stderr
    assert conf_of(res.exec_argv) == "Features=a,b CPUs=4"


def test_slurmd_keeps_the_registration_verbatim_without_extra_features(entrypoint, tcp_listener):
    conf = "Features=cpu Gres=gpu:2 CPUs=8 RealMemory=4000"
    res = entrypoint("slurmd", env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF=conf))
    assert conf_of(res.exec_argv) == conf


def test_slurmd_derives_memory_and_cpus_from_cgroup_v2(entrypoint, tcp_listener, tmp_path):
    cg = cgroup_v2(tmp_path, str(8 * 1024**3), "250000 100000")
    env = slurmd_env(
        tcp_listener,
        SUNK_CGROUP_DIR=str(cg),
        SUNK_RESERVED_MEMORY_MIB="1024",
        SUNK_NODE_FEATURES="cpu-nodes",
    )
    res = entrypoint("slurmd", env=env)
    assert res.rc == 0, res.stderr
    assert conf_of(res.exec_argv) == "Features=cpu-nodes CPUs=3 RealMemory=7168"
    assert "derived" in res.stderr


def test_slurmd_without_limits_uses_meminfo_and_online_cpus(entrypoint, tcp_listener, tmp_path):
    cg = cgroup_v2(tmp_path, "max", "max 100000")
    env = slurmd_env(
        tcp_listener, SUNK_CGROUP_DIR=str(cg), SUNK_MEMINFO=str(meminfo(tmp_path, 16384000))
    )
    res = entrypoint("slurmd", env=env)
    assert res.rc == 0, res.stderr
    cpus = os.sysconf("SC_NPROCESSORS_ONLN")
    assert conf_of(res.exec_argv) == f"CPUs={cpus} RealMemory=16000"


def test_slurmd_reads_cgroup_v1_limits(entrypoint, tcp_listener, tmp_path):
    cg = tmp_path / "v1"
    (cg / "memory").mkdir(parents=True)
    (cg / "cpu").mkdir()
    (cg / "memory" / "memory.limit_in_bytes").write_text(str(4 * 1024**3))
    (cg / "cpu" / "cpu.cfs_quota_us").write_text("200000")
    (cg / "cpu" / "cpu.cfs_period_us").write_text("100000")
    res = entrypoint("slurmd", env=slurmd_env(tcp_listener, SUNK_CGROUP_DIR=str(cg)))
    assert conf_of(res.exec_argv) == "CPUs=2 RealMemory=4096"


def test_slurmd_makes_its_read_only_cgroup_mounts_writable(entrypoint, tcp_listener, tmp_path):
    """An unprivileged container gets its cgroup mounts read-only; slurmd's cgroup plugins
    write there, so each read-only one (and only those under the cgroup root) is remounted
    read-write with a bind remount, which changes the mount's flag only."""
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "tmpfs /sys/fs/cgroup tmpfs rw,nosuid,nodev,noexec,relatime,mode=755 0 0\n"
        "cgroup /sys/fs/cgroup/cpu cgroup ro,nosuid,nodev,noexec,relatime,cpu 0 0\n"
        "cgroup /sys/fs/cgroup/freezer cgroup ro,nosuid,nodev,noexec,relatime,freezer 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0\n"
        "cgroup /elsewhere/cpu cgroup ro,relatime,cpu 0 0\n"
        "proc /proc/sys proc ro,relatime 0 0\n"
    )
    conf = "CPUs=1 RealMemory=100"
    env = slurmd_env(tcp_listener, SUNK_SLURMD_CONF=conf, SUNK_MOUNTS=str(mounts))
    res = entrypoint("slurmd", env=env)
    assert res.rc == 0, res.stderr
    remounts = [line for line in res.stdout.splitlines() if line.startswith("+ mount")]
    assert remounts == [
        "+ mount -o remount,bind,rw /sys/fs/cgroup/cpu",
        "+ mount -o remount,bind,rw /sys/fs/cgroup/freezer",
    ]


def test_slurmd_cgroup_v1_unlimited_falls_back_to_meminfo(entrypoint, tcp_listener, tmp_path):
    cg = tmp_path / "v1"
    (cg / "memory").mkdir(parents=True)
    (cg / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712")
    env = slurmd_env(
        tcp_listener, SUNK_CGROUP_DIR=str(cg), SUNK_MEMINFO=str(meminfo(tmp_path, 2048 * 1024))
    )
    res = entrypoint("slurmd", env=env)
    assert "RealMemory=2048" in conf_of(res.exec_argv)


def test_slurmd_refuses_a_reservation_that_swallows_the_memory(entrypoint, tcp_listener, tmp_path):
    cg = cgroup_v2(tmp_path, str(1024**3), "100000 100000")
    env = slurmd_env(tcp_listener, SUNK_CGROUP_DIR=str(cg), SUNK_RESERVED_MEMORY_MIB="2048")
    res = entrypoint("slurmd", env=env)
    assert res.rc == 1
    assert "leaves no memory" in res.stderr
    assert "exec:" not in res.stdout


def test_slurmd_node_name_and_extra_args(entrypoint, tcp_listener):
    env = slurmd_env(
        tcp_listener, SUNK_SLURMD_CONF="CPUs=1", SUNK_NODE_NAME="n-1", SUNK_EXTRA_ARGS="-vvv -b"
    )
    res = entrypoint("slurmd", env=env)
    assert res.exec_argv[-5:] == ["CPUs=1", "-N", "n-1", "-vvv", "-b"]


def test_slurmd_starts_munged_with_the_mounted_key(entrypoint, tcp_listener, base_env):
    res = entrypoint("slurmd", env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=1"))
    key, source = base_env["SUNK_MUNGE_KEY"], base_env["SUNK_MUNGE_KEY_SOURCE"]
    sock = base_env["SUNK_MUNGE_SOCKET"]
    assert f"cp {source} {key}" in res.actions
    assert f"chown munge:munge {key}" in res.actions
    assert f"chmod 0400 {key}" in res.actions
    started = [a for a in res.actions if a.startswith("setpriv")]
    assert started == [
        "setpriv --reuid=munge --regid=munge --init-groups -- munged --force "
        f"--key-file={key} --socket={sock}"
    ]


def test_slurmd_with_a_munge_sidecar_only_waits(entrypoint, tcp_listener):
    env = slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=1", SUNK_MUNGED="external")
    res = entrypoint("slurmd", env=env)
    assert res.rc == 0, res.stderr
    assert not [a for a in res.actions if "munged " in a or "munge:munge" in a]


def test_slurmd_fails_without_a_munge_socket(entrypoint, tcp_listener, tmp_path):
    env = slurmd_env(
        tcp_listener,
        SUNK_SLURMD_CONF="CPUs=1",
        SUNK_MUNGE_SOCKET=str(tmp_path / "absent.socket"),
        SUNK_MUNGE_TIMEOUT="1",
    )
    res = entrypoint("slurmd", env=env)
    assert res.rc == 1
    assert "no socket at" in res.stderr


def test_slurmd_fails_without_a_munge_key(entrypoint, tcp_listener, tmp_path):
    env = slurmd_env(
        tcp_listener, SUNK_SLURMD_CONF="CPUs=1", SUNK_MUNGE_KEY_SOURCE=str(tmp_path / "none")
    )
    res = entrypoint("slurmd", env=env)
    assert res.rc == 1
    assert "no munge key" in res.stderr


def test_slurmd_times_out_when_the_controller_is_unreachable(entrypoint):
    port = closed_port()
    res = entrypoint("slurmd", env=slurmd_env(port, SUNK_SLURMD_CONF="CPUs=1"))
    assert res.rc == 1
    assert f"127.0.0.1:{port} not reachable after 2s" in res.stderr


def test_slurmd_waits_for_any_controller_and_lists_every_one(entrypoint, tcp_listener):
    """HA: SUNK_CONTROLLER names the primary and its standbys; one answering is enough (the
    primary may be the one that is down), and slurmd gets all of them, in order."""
    down = closed_port()
    env = slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=1")
    env["SUNK_CONTROLLER"] = f"127.0.0.1:{down},127.0.0.1:{tcp_listener}"
    res = entrypoint("slurmd", env=env)
    assert res.rc == 0, res.stderr
    servers = res.exec_argv[res.exec_argv.index("--conf-server") + 1]
    assert servers == f"127.0.0.1:{down},127.0.0.1:{tcp_listener}"


def test_slurmd_needs_the_controller_address(entrypoint):
    res = entrypoint("slurmd", env={"SUNK_SLURMD_CONF": "CPUs=1"})
    assert res.rc == 1
    assert "SUNK_CONTROLLER" in res.stderr


@pytest.mark.parametrize("value", ["ctl:http", "ctl:"])
def test_slurmd_rejects_a_bad_controller_port(entrypoint, value):
    res = entrypoint("slurmd", env={"SUNK_CONTROLLER": value, "SUNK_SLURMD_CONF": "CPUs=1"})
    assert res.rc == 1
    assert "bad port" in res.stderr


def test_slurmd_image_runs_the_munge_sidecar(entrypoint, base_env):
    res = entrypoint("slurmd", "munged")
    assert res.exec_argv == as_user(
        "munge", "munged", "--foreground", "--force",
        f"--key-file={base_env['SUNK_MUNGE_KEY']}", f"--socket={base_env['SUNK_MUNGE_SOCKET']}",
    )  # fmt: skip


def test_slurmd_image_passes_other_commands_through(entrypoint):
    res = entrypoint("slurmd", "slurmd", "-C")
    assert res.rc == 1  # `slurmd -C` still needs SUNK_CONTROLLER: it is the daemon role
    res = entrypoint("slurmd", "scontrol", "show", "config")
    assert res.exec_argv == ["scontrol", "show", "config"]


# --------------------------------------------------------------------------- controller


def test_slurmctld_runs_as_slurm_in_the_foreground(entrypoint, etc, tmp_path):
    state = tmp_path / "state"
    env = {"SUNK_ETC": str(etc), "SUNK_STATE_DIR": str(state), "SUNK_RUN_DIR": str(tmp_path)}
    res = entrypoint("controller", "slurmctld", env=env)
    assert res.rc == 0, res.stderr
    assert res.exec_argv == as_user("slurm", "slurmctld", "-D", "-f", f"{etc}/slurm.conf")
    assert f"chown slurm:slurm {state}" in res.actions
    assert any(a.startswith("setpriv --reuid=munge") for a in res.actions)


def test_slurmctld_is_the_default_role_and_takes_extra_args(entrypoint, etc, tmp_path):
    env = {"SUNK_ETC": str(etc), "SUNK_STATE_DIR": str(tmp_path), "SUNK_EXTRA_ARGS": "-vv"}
    res = entrypoint("controller", env=env)
    assert res.exec_argv[-4:] == ["-D", "-f", f"{etc}/slurm.conf", "-vv"]


def test_slurmctld_needs_the_config(entrypoint, tmp_path):
    res = entrypoint("controller", "slurmctld", env={"SUNK_ETC": str(tmp_path)})
    assert res.rc == 1
    assert "slurm.conf missing" in res.stderr


def test_slurmdbd_gets_a_private_copy_of_its_config(entrypoint, tmp_path):
    conf = tmp_path / "secret" / "slurmdbd.conf"
    conf.parent.mkdir()
    conf.write_text("DbdHost=x\n")
    run = tmp_path / "run-dbd"
    env = {"SUNK_SLURMDBD_CONF": str(conf), "SUNK_SLURMDBD_RUN_DIR": str(run)}
    res = entrypoint("controller", "slurmdbd", env=env)
    assert res.rc == 0, res.stderr
    assert f"install -m 0600 -o slurm -g slurm {conf} {run}/etc/slurmdbd.conf" in res.actions, (
        res.actions
    )
    assert res.exec_argv == as_user(
        "slurm", "env", f"SLURM_CONF={run}/etc/slurm.conf", "slurmdbd", "-D"
    )


def test_slurmdbd_waits_for_the_database(entrypoint, tmp_path, tcp_listener):
    conf = tmp_path / "slurmdbd.conf"
    conf.write_text("x\n")
    env = {
        "SUNK_SLURMDBD_CONF": str(conf),
        "SUNK_SLURMDBD_RUN_DIR": str(tmp_path / "r"),
        "SUNK_DB_TIMEOUT": "1",
    }
    up = {**env, "SUNK_DB_WAIT": f"127.0.0.1:{tcp_listener}"}
    ok = entrypoint("controller", "slurmdbd", env=up)
    assert ok.rc == 0, ok.stderr
    port = closed_port()
    down = entrypoint("controller", "slurmdbd", env={**env, "SUNK_DB_WAIT": f"127.0.0.1:{port}"})
    assert down.rc == 1
    assert "not reachable" in down.stderr


def test_slurmdbd_needs_its_config(entrypoint, tmp_path):
    res = entrypoint("controller", "slurmdbd", env={"SUNK_SLURMDBD_CONF": str(tmp_path / "no")})
    assert res.rc == 1
    assert "slurmdbd.conf" in res.stderr or "no" in res.stderr


def test_slurmrestd_runs_as_its_own_user(entrypoint, etc):
    res = entrypoint("controller", "slurmrestd", env={"SUNK_ETC": str(etc)})
    assert res.rc == 0, res.stderr
    assert res.exec_argv == as_user(
        "slurmrestd", "env", f"SLURM_CONF={etc}/slurm.conf",
        "SLURMRESTD_SECURITY=disable_unshare_files,disable_unshare_sysv", "SLURM_JWT=daemon",
        "slurmrestd", "-a", "rest_auth/jwt", "0.0.0.0:6820",
    )  # fmt: skip


def test_controller_with_munge_sidecar_and_passthrough(entrypoint, etc, tmp_path):
    env = {"SUNK_ETC": str(etc), "SUNK_STATE_DIR": str(tmp_path), "SUNK_MUNGED": "external"}
    res = entrypoint("controller", "slurmctld", env=env)
    assert not [a for a in res.actions if "munged " in a or "munge:munge" in a]
    assert entrypoint("controller", "scontrol", "ping").exec_argv == ["scontrol", "ping"]
    bad = entrypoint("controller", "slurmctld", env={**env, "SUNK_MUNGED": "maybe"})
    assert bad.rc == 1
    assert "SUNK_MUNGED" in bad.stderr


# --------------------------------------------------------------------------- login


def test_login_motd_names_the_cluster_and_sshd_runs_in_the_foreground(
    entrypoint, login_env, tmp_path
):
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "ssh_host_ed25519_key").write_text("PRIVATE\n")
    (secret / "ssh_host_ed25519_key.pub").write_text("PUBLIC\n")
    env = {
        **login_env,
        "SUNK_SSH_HOST_KEYS_SOURCE": str(secret),
        "SUNK_CLUSTER_NAME": "prod-a",
        "SUNK_SSHD_PORT": "2222",
        "SUNK_MOTD_EXTRA": "Maintenance on Friday.",
    }
    res = entrypoint("login", env=env)
    assert res.rc == 0, res.stderr
    assert res.exec_argv == ["/usr/sbin/sshd", "-D", "-e", "-p", "2222"]
    motd = Path(login_env["SUNK_MOTD"]).read_text()
    assert "Welcome to the prod-a Slurm cluster" in motd
    assert "Maintenance on Friday." in motd
    key = Path(login_env["SUNK_SSH_DIR"]) / "ssh_host_ed25519_key"
    assert key.read_text() == "PRIVATE\n"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert (key.parent / "ssh_host_ed25519_key.pub").read_text() == "PUBLIC\n"
    assert "from" in res.stderr and "generating" not in res.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_login_generates_host_keys_without_a_secret(entrypoint, login_env):
    res = entrypoint("login", env=login_env, timeout=120)
    assert res.rc == 0, res.stderr
    ssh = Path(login_env["SUNK_SSH_DIR"])
    assert sorted(p.name for p in ssh.glob("ssh_host_*_key")) == [
        "ssh_host_ecdsa_key",
        "ssh_host_ed25519_key",
        "ssh_host_rsa_key",
    ]
    # A restart keeps the keys it made.
    before = (ssh / "ssh_host_ed25519_key").read_text()
    entrypoint("login", env=login_env, timeout=120)
    assert (ssh / "ssh_host_ed25519_key").read_text() == before


def test_login_without_slurm_conf_runs_sackd(entrypoint, login_env, tmp_path):
    empty = tmp_path / "empty-etc"
    empty.mkdir()
    env = {**login_env, "SUNK_ETC": str(empty), "SUNK_CONTROLLER": "ctl-0.ns.svc:6817"}
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "ssh_host_ed25519_key").write_text("K\n")
    env["SUNK_SSH_HOST_KEYS_SOURCE"] = str(secret)
    res = entrypoint("login", env=env)
    assert res.rc == 0, res.stderr
    assert "sackd --conf-server ctl-0.ns.svc:6817" in res.actions
    env.pop("SUNK_CONTROLLER")
    res = entrypoint("login", env=env)
    assert res.rc == 1
    assert "SUNK_CONTROLLER" in res.stderr


def test_login_nsscache_is_optional(entrypoint, login_env, tmp_path):
    conf = tmp_path / "nsscache.conf"
    conf.write_text("[DEFAULT]\n")
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "ssh_host_ed25519_key").write_text("K\n")
    env = {
        **login_env,
        "SUNK_NSSCACHE_CONF": str(conf),
        "SUNK_SSH_HOST_KEYS_SOURCE": str(secret),
    }
    res = entrypoint("login", env=env)
    assert res.rc == 0, res.stderr
    if shutil.which("nsscache"):
        assert f"nsscache -c {conf} update --full" in res.actions
    else:
        assert "nsscache is not installed" in res.stderr


def sssd_env(tmp_path: Path, password: str | None) -> dict[str, str]:
    source = tmp_path / "sssd-source.conf"
    source.write_text("[sssd]\ndomains = directory\n\n[domain/directory]\nid_provider = ldap\n")
    env = {
        "SUNK_SSSD_CONF_SOURCE": str(source),
        "SUNK_SSSD_CONF": str(tmp_path / "etc-sssd" / "sssd.conf"),
        "SUNK_SSSD_BIND_PASSWORD": str(tmp_path / "no-password"),
    }
    if password is not None:
        (tmp_path / "password").write_text(password)
        env["SUNK_SSSD_BIND_PASSWORD"] = str(tmp_path / "password")
    return env


def test_login_image_runs_the_sssd_sidecar_with_the_bind_password_added(entrypoint, tmp_path):
    env = sssd_env(tmp_path, "s3cret pass\n")  # a Secret often ends with a line feed
    res = entrypoint("login", "sssd", env=env)
    assert res.rc == 0, res.stderr
    conf = Path(env["SUNK_SSSD_CONF"])
    assert res.exec_argv == ["sssd", "-i", "--logger=stderr", "-c", str(conf)]
    # the shared emptyDirs start empty: SSSD's private socket directory is made first
    assert "install -d -m 0700 /var/lib/sss/pipes/private" in res.actions
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert conf.read_text().endswith(
        "id_provider = ldap\nldap_default_authtok_type = password\n"
        "ldap_default_authtok = s3cret pass\n"
    )
    # anonymous: no password file, the rendered file as it is
    env = sssd_env(tmp_path, None)
    assert entrypoint("login", "sssd", env=env).rc == 0
    assert "authtok" not in Path(env["SUNK_SSSD_CONF"]).read_text()


@pytest.mark.parametrize("password", ["line1\nldap_uri = ldap://evil", "", "tab\there"])
def test_login_image_refuses_a_bind_password_that_would_add_keys(entrypoint, tmp_path, password):
    env = sssd_env(tmp_path, password)
    res = entrypoint("login", "sssd", env=env)
    assert res.rc == 1
    assert env["SUNK_SSSD_BIND_PASSWORD"] in res.stderr
    assert not Path(env["SUNK_SSSD_CONF"]).exists()


def test_login_image_sssd_needs_its_config(entrypoint, tmp_path):
    env = sssd_env(tmp_path, None)
    Path(env["SUNK_SSSD_CONF_SOURCE"]).unlink()
    res = entrypoint("login", "sssd", env=env)
    assert res.rc == 1 and "no sssd.conf" in res.stderr


def test_login_takes_user_keys_from_the_directory_when_asked(entrypoint, login_env, tmp_path):
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "ssh_host_ed25519_key").write_text("K\n")
    env = {**login_env, "SUNK_SSH_HOST_KEYS_SOURCE": str(secret)}
    drop_in = Path(login_env["SUNK_SSH_DIR"]) / "sshd_config.d" / "20-sunk-directory.conf"
    assert entrypoint("login", env=env).rc == 0
    assert not drop_in.exists()
    assert entrypoint("login", env={**env, "SUNK_DIRECTORY": "sssd"}).rc == 0
    assert drop_in.read_text() == (
        "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u\n"
        "AuthorizedKeysCommandUser nobody\n"
    )
    res = entrypoint("login", env={**env, "SUNK_DIRECTORY": "ldap"})
    assert res.rc == 1 and "SUNK_DIRECTORY must be sssd" in res.stderr


def test_slurmctld_names_a_missing_jwt_key(entrypoint, etc, tmp_path):
    key = tmp_path / "jwt" / "jwt.key"
    (etc / "slurm.conf").write_text(f"AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={key}\n")
    env = {"SUNK_ETC": str(etc), "SUNK_STATE_DIR": str(tmp_path)}
    res = entrypoint("controller", "slurmctld", env=env)
    assert res.rc == 1
    assert f"JWT key {key} missing" in res.stderr
    key.parent.mkdir()
    key.write_bytes(b"x" * 32)
    assert entrypoint("controller", "slurmctld", env=env).rc == 0


def test_slurmdbd_uses_the_compat_mariadb_library_when_present(entrypoint, tmp_path):
    conf = tmp_path / "slurmdbd.conf"
    conf.write_text("x\n")
    compat = tmp_path / "compat"
    compat.mkdir()
    (compat / "libmariadb.so.3").write_bytes(b"")
    run = tmp_path / "r"
    env = {
        "SUNK_SLURMDBD_CONF": str(conf),
        "SUNK_SLURMDBD_RUN_DIR": str(run),
        "SUNK_MARIADB_COMPAT_DIR": str(compat),
    }
    res = entrypoint("controller", "slurmdbd", env=env)
    assert res.exec_argv == as_user(
        "slurm", "env", f"SLURM_CONF={run}/etc/slurm.conf", f"LD_LIBRARY_PATH={compat}",
        "slurmdbd", "-D",
    )  # fmt: skip
    off = entrypoint("controller", "slurmdbd", env={**env, "SUNK_MARIADB_COMPAT_DIR": ""})
    assert not [a for a in off.exec_argv if a.startswith("LD_LIBRARY_PATH")]


def test_login_nsscache_updates_and_adds_the_cache_source(entrypoint, login_env, tmp_path):
    conf = tmp_path / "nsscache.conf"
    conf.write_text("[DEFAULT]\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nsscache").write_text("#!/bin/sh\nexit 0\n")
    (fake / "nsscache").chmod(0o755)
    nsswitch = tmp_path / "nsswitch.conf"
    nsswitch.write_text("passwd:         files\ngroup:          files\nshadow:         files\n"
                        "hosts:          files dns\n")  # fmt: skip
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "ssh_host_ed25519_key").write_text("K\n")
    env = {
        **login_env,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "SUNK_NSSCACHE_CONF": str(conf),
        "SUNK_NSSWITCH": str(nsswitch),
        "SUNK_SSH_HOST_KEYS_SOURCE": str(secret),
    }
    for _ in range(2):  # a restart does not add `cache` twice
        res = entrypoint("login", env=env)
        assert res.rc == 0, res.stderr
        assert f"nsscache -c {conf} update --full" in res.actions
    lines = nsswitch.read_text().splitlines()
    assert lines == [
        "passwd:         files cache",
        "group:          files cache",
        "shadow:         files cache",
        "hosts:          files dns",
    ]
