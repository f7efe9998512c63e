"""SlurmCluster builders: the control-plane objects for a rendered cluster."""

from __future__ import annotations

import base64

from sunk.models.crds import SlurmClusterSpec
from sunk.operator import names
from sunk.operator.cluster import keys
from sunk.operator.cluster.accounting import slurmdbd_secret
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects, disruption_budgets_off
from sunk.slurmconf import ClusterInputs, Endpoints, render_all


def context(**spec) -> ClusterContext:
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c", **spec})
    rendered = render_all(
        ClusterInputs(cluster, (), Endpoints.for_cluster(cluster, "ns"), db_password="pw")
    )
    return ClusterContext("c", "ns", "uid-1", cluster, rendered, "c-munge", "c-jwt", None)


def by_kind(objects):
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)


def test_default_cluster_objects():
    objects = desired_objects(context())
    assert by_kind(objects) == [
        "ConfigMap/c-slurm-config",
        "ConfigMap/c-topology",
        "Deployment/c-accounting",
        "Deployment/c-rest",
        "Service/c-accounting",
        "Service/c-controller",
        "Service/c-login",
        "Service/c-login-pods",
        "Service/c-mariadb",
        "Service/c-rest",
        "ServiceAccount/c-accounting",
        "ServiceAccount/c-controller",
        "ServiceAccount/c-database",
        "ServiceAccount/c-login",
        "ServiceAccount/c-rest",
        "ServiceAccount/c-slurmd",
        "StatefulSet/c-controller",
        "StatefulSet/c-login",
        "StatefulSet/c-mariadb",
    ]
    for obj in objects:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert obj["metadata"]["labels"][names.LABEL_CLUSTER] == "c"
    config = next(o for o in objects if o["metadata"]["name"] == "c-slurm-config")
    assert "slurmdbd.conf" not in config["data"]  # it holds the password: a Secret
    assert "slurm.conf" in config["data"]


def test_controller_state_is_kept_and_pods_tolerate_the_lock():
    ctl = next(
        o
        for o in desired_objects(context())
        if o["metadata"]["name"] == "c-controller" and o["kind"] == "StatefulSet"
    )
    assert ctl["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert ctl["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "32Gi"
    }
    pod = ctl["spec"]["template"]
    assert pod["metadata"]["annotations"][names.ANN_CONFIG_HASH]
    assert names.LOCK_TOLERATION in pod["spec"]["tolerations"]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["slurmctld", "reconfigure", "munge"]
    drop = context(controller={"keepStateOnDelete": False})
    ctl = next(
        o
        for o in desired_objects(drop)
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "c-controller"
    )
    assert ctl["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"


def test_optional_components_and_external_db():
    ctx = context(
        rest={"enabled": False},
        login={"enabled": False},
        accounting={
            "database": {"type": "external"},
            "external": {"host": "db.example", "passwordSecret": {"name": "x"}},
        },
    )
    kinds = by_kind(desired_objects(ctx))
    assert "Deployment/c-rest" not in kinds and "StatefulSet/c-login" not in kinds
    assert "StatefulSet/c-mariadb" not in kinds and "Deployment/c-accounting" in kinds
    secret = slurmdbd_secret(ctx)
    text = base64.b64decode(secret["data"]["slurmdbd.conf"]).decode()
    assert "StorageHost=db.example" in text and "StoragePass=pw" in text


def test_moco_database_and_login_service_policy():
    ctx = context(
        accounting={"database": {"type": "moco"}},
        login={"service": {"type": "ClusterIP", "externalTrafficPolicy": "Local"}},
    )
    objects = desired_objects(ctx)
    (moco,) = [o for o in objects if o["kind"] == "MySQLCluster"]
    assert moco["spec"]["replicas"] == 3
    svc = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "c-login")
    assert svc["spec"]["type"] == "ClusterIP"
    assert "externalTrafficPolicy" not in svc["spec"]  # invalid on ClusterIP services


def test_keys_are_random_and_well_formed():
    first, second = keys.munge_key()["munge.key"], keys.munge_key()["munge.key"]
    assert first != second and len(base64.b64decode(first)) == 1024
    host = keys.ssh_host_keys()
    assert base64.b64decode(host["ssh_host_ed25519_key.pub"]).startswith(b"ssh-ed25519 ")
    secret = keys.secret("s", "ns", keys.jwt_key(), {})
    assert secret["immutable"] is True and "ownerReferences" not in secret["metadata"]


def test_login_mounts_host_keys_where_the_image_reads_them():
    login = next(
        o
        for o in desired_objects(context())
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "c-login"
    )
    sshd = login["spec"]["template"]["spec"]["containers"][0]
    mount = next(m for m in sshd["volumeMounts"] if m["name"] == "host-keys")
    # images/login/entrypoint.sh: SUNK_SSH_HOST_KEYS_SOURCE defaults to this path.
    assert mount["mountPath"] == "/etc/ssh/host-keys-secret"


def test_slurm_daemons_can_read_the_jwt_key():
    """slurmctld and slurmdbd drop to slurm (401); the key is a 0400 file in a projected
    volume, which only the pod's fsGroup makes readable to them (found on real nodes)."""
    objects = {
        o["metadata"]["name"]: o
        for o in desired_objects(context())
        if o["kind"] in ("StatefulSet", "Deployment")
    }
    for name in ("c-controller", "c-accounting"):
        pod = objects[name]["spec"]["template"]["spec"]
        assert pod["securityContext"]["fsGroup"] == 401, name


def test_database_images_take_their_pull_policy():
    maria_image = {"repository": "mariadb", "tag": "11.4", "pullPolicy": "Always"}
    ctx = context(accounting={"database": {"mariadb": {"image": maria_image}}})
    (maria,) = [
        o
        for o in desired_objects(ctx)
        if o["kind"] == "StatefulSet" and "mariadb" in o["metadata"]["name"]
    ]
    assert maria["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    moco_image = {"repository": "cybozu-go/moco/mysql", "tag": "8.4.4", "pullPolicy": "Never"}
    ctx = context(accounting={"database": {"type": "moco", "moco": {"image": moco_image}}})
    (moco,) = [o for o in desired_objects(ctx) if o["kind"] == "MySQLCluster"]
    (mysqld,) = moco["spec"]["podTemplate"]["spec"]["containers"]
    assert mysqld["imagePullPolicy"] == "Never"


def test_only_the_daemons_that_verify_tokens_get_the_jwt_key():
    """With the key anyone can mint a token for any user: slurmctld and slurmdbd verify
    tokens and get it; slurmrestd and the login Pods only pass tokens on."""
    objects = {
        o["metadata"]["name"]: o
        for o in desired_objects(context(rest={"enabled": True}, login={"enabled": True}))
        if o["kind"] in ("StatefulSet", "Deployment")
    }

    def has_key(name: str) -> bool:
        volumes = objects[name]["spec"]["template"]["spec"].get("volumes") or []
        sources = [s for v in volumes for s in (v.get("projected") or {}).get("sources", [])]
        return any((s.get("secret") or {}).get("name") == "c-jwt" for s in sources)

    assert {n for n in objects if has_key(n)} == {"c-controller", "c-accounting"}
    assert {"c-rest", "c-login"} <= set(objects)


def _pod_specs(ctx: ClusterContext) -> dict[str, dict]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in desired_objects(ctx)
        if o["kind"] in ("StatefulSet", "Deployment")
    }


def test_control_plane_pods_are_hardened_by_default():
    pods = _pod_specs(context())
    for name in ("c-controller", "c-accounting", "c-rest", "c-mariadb"):
        assert pods[name]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pods[name]["containers"]:
            if container["name"] == "munge":  # its own context (nodeset.pod)
                continue
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["resources"]["requests"], (name, container["name"])
    assert pods["c-controller"]["securityContext"]["fsGroup"] == 401
    assert pods["c-accounting"]["securityContext"]["fsGroup"] == 401
    (ctld,) = [c for c in pods["c-controller"]["containers"] if c["name"] == "slurmctld"]
    assert ctld["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}
    # login: seccomp too, and no escalation in users' sessions; sshd keeps its capability set
    assert pods["c-login"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (sshd,) = [c for c in pods["c-login"]["containers"] if c["name"] == "sshd"]
    assert sshd["securityContext"]["allowPrivilegeEscalation"] is False
    assert "SETUID" in sshd["securityContext"]["capabilities"]["add"]
    assert sshd["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}


def test_the_slurm_daemons_and_the_control_plane_munge_never_run_as_root():
    """Each starts as its own user with no capability: slurmctld, slurmdbd and the reconfigure
    loop as SlurmUser (401), slurmrestd as 403, the control plane's munge sidecars as munge
    (402), which reads its key through the Pod's fsGroup. Only a one-shot init container
    starts as root, with CHOWN alone, to give slurmctld's state volume to SlurmUser; MariaDB
    and the login and slurmd Pods' munge still start as root and drop."""
    pods = _pod_specs(context())

    def context_of(pod: str, container: str, kind: str = "containers") -> dict:
        (found,) = [c for c in pods[pod][kind] if c["name"] == container]
        return found["securityContext"]

    for pod, container, uid in (
        ("c-controller", "slurmctld", 401),
        ("c-controller", "reconfigure", 401),
        ("c-controller", "munge", 402),
        ("c-accounting", "slurmdbd", 401),
        ("c-accounting", "munge", 402),
        ("c-rest", "slurmrestd", 403),
        ("c-rest", "munge", 402),
    ):
        security = context_of(pod, container)
        assert security["runAsUser"] == security["runAsGroup"] == uid, (pod, container)
        assert security["runAsNonRoot"] is True, (pod, container)
        assert security["capabilities"] == {"drop": ["ALL"]}, (pod, container)
    for pod, group in (("c-controller", 401), ("c-accounting", 401), ("c-rest", 402)):
        assert pods[pod]["securityContext"]["fsGroup"] == group, pod
    (owner,) = pods["c-controller"]["initContainers"]
    assert owner["args"] == ["chown", "401:401", "/var/spool/slurmctld"]
    assert owner["volumeMounts"] == [{"name": "state", "mountPath": "/var/spool/slurmctld"}]
    assert owner["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert owner["securityContext"]["allowPrivilegeEscalation"] is False
    for pod, container in (("c-mariadb", "mariadb"), ("c-login", "munge")):
        security = context_of(pod, container)
        assert "runAsUser" not in security, container
        assert "SETUID" in security["capabilities"]["add"], container


def test_values_replace_the_hardening_defaults():
    mine = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
    pods = _pod_specs(
        context(
            controller={
                "resources": mine,
                "podSecurityContext": {"runAsNonRoot": False},
                "securityContext": {"privileged": False},
            },
            accounting={"database": {"mariadb": {"resources": mine}}},
        )
    )
    assert pods["c-controller"]["securityContext"] == {"runAsNonRoot": False}
    (ctld,) = [c for c in pods["c-controller"]["containers"] if c["name"] == "slurmctld"]
    assert ctld["resources"] == mine
    assert ctld["securityContext"] == {"privileged": False}
    assert pods["c-mariadb"]["containers"][0]["resources"] == mine


def _budgets(ctx: ClusterContext) -> dict[str, dict]:
    return {
        o["metadata"]["name"]: o for o in desired_objects(ctx) if o["kind"] == "PodDisruptionBudget"
    }


def test_no_disruption_budget_by_default():
    """The controller's is opt-in (it would hold drains); one login Pod gets none."""
    ctx = context()
    assert _budgets(ctx) == {}
    assert disruption_budgets_off(ctx) == ["c-controller", "c-login"]


def test_disruption_budgets_select_their_workloads_pods_and_are_owned():
    ctx = context(controller={"podDisruptionBudget": {"enabled": True}}, login={"replicas": 3})
    budgets = _budgets(ctx)
    assert set(budgets) == {"c-controller", "c-login"}
    assert budgets["c-controller"]["spec"]["maxUnavailable"] == 0
    assert budgets["c-login"]["spec"]["maxUnavailable"] == 1
    workloads = {
        o["metadata"]["name"]: o for o in desired_objects(ctx) if o["kind"] == "StatefulSet"
    }
    for name, budget in budgets.items():
        assert budget["apiVersion"] == "policy/v1"
        assert budget["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        selector = budget["spec"]["selector"]["matchLabels"]
        assert selector == workloads[name]["spec"]["selector"]["matchLabels"]
        pod_labels = workloads[name]["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items()
    assert disruption_budgets_off(ctx) == []


def test_disruption_budget_switches():
    ctx = context(login={"replicas": 2, "podDisruptionBudget": {"maxUnavailable": "50%"}})
    assert _budgets(ctx)["c-login"]["spec"]["maxUnavailable"] == "50%"
    off = context(login={"replicas": 2, "podDisruptionBudget": {"enabled": False}})
    assert _budgets(off) == {}
    assert "c-login" in disruption_budgets_off(off)
    assert "c-login" in disruption_budgets_off(context(login={"replicas": 2, "enabled": False}))


def test_every_pod_runs_as_its_components_own_account_without_a_token():
    objects = desired_objects(context())
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    for account in accounts.values():
        assert account["automountServiceAccountToken"] is False
        assert account["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    pods = _pod_specs(context())
    assert {name: spec["serviceAccountName"] for name, spec in pods.items()} == {
        "c-controller": "c-controller",
        "c-accounting": "c-accounting",
        "c-rest": "c-rest",
        "c-login": "c-login",
        "c-mariadb": "c-database",
    }
    assert set(accounts) == {spec["serviceAccountName"] for spec in pods.values()} | {"c-slurmd"}
