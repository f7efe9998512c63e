"""Desired control-plane objects of one SlurmCluster.

Every object carries the standard labels and an owner reference to the SlurmCluster (so it
is garbage-collected with it) — except what holds state: key Secrets (no owner) and PVCs
(StatefulSet volume claims, retained unless `controller.keepStateOnDelete` is false).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sunk.models.crds import SlurmClusterSpec
from sunk.models.k8s import PersistentStorage, image_ref
from sunk.operator import directory, names, s6, shared_volumes
from sunk.operator.common import (
    MUNGE_SOCKET,
    POD_SECURITY_CONTEXT,
    ROOT_THEN_USER_SECURITY_CONTEXT,
    cluster_labels,
    cluster_owner,
    munge_sidecar,
    munge_volumes,
    non_root,
    service_account,
)
from sunk.operator.hashing import stable_hash
from sunk.slurmconf import Endpoints, Rendered
from sunk.slurmconf.inputs import service_domain
from sunk.slurmconf.lua import CLIENT_FILES, CONTROLLER_FILES
from sunk.slurmconf.sssd import FILE as SSSD_FILE

SLURM_UID = 401  # the images' fixed ids (images/common/install-slurm.sh), as SUNK's
SLURMRESTD_UID = 403
# sshd's own needs and nothing more: bind port 22, chroot its privilege-separated child,
# switch to the user, chown the session's pty and a new home, write the login audit record.
SSHD_SECURITY_CONTEXT = {
    # sshd switches to each user itself (root with SETUID/SETGID); no setuid binary is needed,
    # so sessions cannot gain privileges through one (su, sudo) either.
    "allowPrivilegeEscalation": False,
    "capabilities": {
        "drop": ["ALL"],
        "add": ["AUDIT_WRITE", "CHOWN", "NET_BIND_SERVICE", "SETGID", "SETUID", "SYS_CHROOT"],
    },
}


# slurmctld, slurmdbd and MariaDB start as root, own their state directories and key copies,
# then setpriv (or mariadbd --user) to their user: no setuid binary on the way, so no privilege
# escalation, and only ROOT_THEN_USER_SECURITY_CONTEXT's capabilities. slurmrestd owns nothing
# and reads only slurm.conf and the munge socket: it starts as its own user. So does the
# reconfigure loop, as SlurmUser, whom slurmctld lets reconfigure. The e2e tier runs them so on
# real nodes; the images tier runs the same entrypoints under Docker's default seccomp profile.
SLURMRESTD_SECURITY_CONTEXT = non_root(SLURMRESTD_UID)
RECONFIGURE_SECURITY_CONTEXT = non_root(SLURM_UID)
# Requests (never limits: see checkov-skips.yaml) of a component whose `resources` is unset.
DEFAULT_REQUESTS = {
    "slurmctld": {"cpu": "100m", "memory": "256Mi"},
    "slurmdbd": {"cpu": "50m", "memory": "128Mi"},
    "slurmrestd": {"cpu": "50m", "memory": "128Mi"},
    "sshd": {"cpu": "100m", "memory": "256Mi"},
    "mariadb": {"cpu": "100m", "memory": "256Mi"},
}


@dataclass(frozen=True)
class ClusterContext:
    name: str  # SlurmCluster metadata.name
    namespace: str
    uid: str
    spec: SlurmClusterSpec
    rendered: Rendered
    munge_secret: str
    jwt_secret: str
    db_password_secret: tuple[str, str] | None  # (Secret name, key)

    @property
    def cluster(self) -> str:
        return self.spec.clusterName


def labels(ctx: ClusterContext, component: str) -> dict[str, str]:
    return cluster_labels(ctx.cluster, component)


def selector(ctx: ClusterContext, component: str) -> dict[str, str]:
    return {names.LABEL_CLUSTER: ctx.cluster, names.LABEL_COMPONENT: component}


def owner(ctx: ClusterContext) -> list[dict[str, Any]]:
    return cluster_owner(ctx.name, ctx.uid)


def _account(ctx: ClusterContext, pod: dict[str, Any], component: str) -> dict[str, Any]:
    """The component's ServiceAccount, named in its Pod spec ``pod``."""
    account = service_account(ctx.namespace, ctx.cluster, component, ctx.name, ctx.uid)
    pod["serviceAccountName"] = account["metadata"]["name"]
    return account


def meta(ctx: ClusterContext, name: str, component: str, owned: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "namespace": ctx.namespace,
        "labels": labels(ctx, component),
    }
    if owned:
        out["ownerReferences"] = owner(ctx)
    return out


def _tolerations(opts: Any) -> list[dict[str, Any]]:
    tols = [t.model_dump(exclude_none=True) for t in (opts.tolerations or [])]
    if names.LOCK_TOLERATION not in tols:
        tols.append(names.LOCK_TOLERATION)
    return tols


def _pull_secrets(ctx: ClusterContext) -> list[dict[str, str]]:
    return list(ctx.spec.imagePullSecrets)


def munge_container(ctx: ClusterContext) -> dict[str, Any]:
    """The munge sidecar of every control-plane Pod, sized by `munge.resources`, as the slurmd
    Pods' (sunk.operator.nodeset.pod)."""
    resources = ctx.spec.munge.resources
    return munge_sidecar(
        image_ref(ctx.spec.controller.image, ctx.spec.global_.imageRegistry),
        resources.model_dump(mode="json", exclude_none=True) if resources is not None else None,
    )


def _lua_sources(ctx: ClusterContext, files: tuple[str, ...]) -> list[dict[str, Any]]:
    """Projections of the Lua plugin scripts this Pod reads (``files``), beside slurm.conf:
    inline ones from the operator's ConfigMap, referenced ones from the user's."""
    inline: list[dict[str, str]] = []
    refs: list[dict[str, Any]] = []
    for name, script in ctx.spec.slurmConfig.lua().items():
        if name not in files:
            continue
        if script.configMap is not None:
            item = {"key": script.configMap.key or name, "path": name}
            refs.append({"configMap": {"name": script.configMap.name, "items": [item]}})
        else:
            inline.append({"key": name, "path": name})
    if inline:
        refs.insert(0, {"configMap": {"name": names.lua_map(ctx.cluster), "items": inline}})
    return refs


def _config_volume(
    ctx: ClusterContext, lua: tuple[str, ...] = (), jwt_key: bool = False
) -> dict[str, Any]:
    """/etc/slurm. ``jwt_key``: only the daemons that sign and verify tokens (slurmctld,
    slurmdbd) get the key; with it anyone could mint a token for any user, and slurmrestd and
    the clients only pass tokens on."""
    sources: list[dict[str, Any]] = [{"configMap": {"name": names.config_map(ctx.cluster)}}]
    if ctx.spec.compute.generateTopology:
        sources.append({"configMap": {"name": names.topology_map(ctx.cluster)}})
    sources += _lua_sources(ctx, lua)
    if jwt_key:
        item = {"key": "jwt.key", "path": "jwt/jwt.key", "mode": 0o400}
        sources.append({"secret": {"name": ctx.jwt_secret, "items": [item]}})
    return {"name": "slurm-config", "projected": {"sources": sources, "defaultMode": 0o444}}


def _pod_spec(
    ctx: ClusterContext,
    opts: Any,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    hostname: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [*containers, munge_container(ctx)],
        "volumes": [*volumes, *munge_volumes(ctx.munge_secret)],
        "tolerations": _tolerations(opts),
        "enableServiceLinks": False,
        # No Slurm daemon talks to the Kubernetes API; users SSH into the login Pods.
        "automountServiceAccountToken": False,
    }
    if hostname:
        spec["hostname"] = hostname
    for key, value in (
        ("affinity", opts.affinity or ctx.spec.global_.affinity),
        ("nodeSelector", opts.nodeSelector),
        ("priorityClassName", opts.priorityClassName),
        ("securityContext", opts.podSecurityContext),
        ("terminationGracePeriodSeconds", opts.terminationGracePeriodSeconds),
        ("imagePullSecrets", _pull_secrets(ctx)),
    ):
        if value:
            spec[key] = value
    return spec


def _resources(name: str, resources: Any) -> dict[str, Any]:
    if resources is not None:
        return resources.model_dump(exclude_none=True)
    return {"requests": dict(DEFAULT_REQUESTS.get(name, {}))}


def _pod_security(spec: dict[str, Any], fs_group: int | None = None) -> None:
    """The Pod's securityContext when `podSecurityContext` is unset: seccomp RuntimeDefault,
    and ``fs_group`` for the daemons that run as slurm and read group-owned volumes."""
    default = copy.deepcopy(POD_SECURITY_CONTEXT)
    if fs_group is not None:
        default["fsGroup"] = fs_group
    spec.setdefault("securityContext", default)


def _container(
    ctx: ClusterContext,
    name: str,
    opts: Any,
    args: list[str],
    port: int | None = None,
    security: dict[str, Any] = ROOT_THEN_USER_SECURITY_CONTEXT,
) -> dict[str, Any]:
    """A Slurm daemon's container; ``security`` is its securityContext unless the component's
    `securityContext` replaces it."""
    container: dict[str, Any] = {
        "name": name,
        "image": image_ref(opts.image, ctx.spec.global_.imageRegistry),
        "args": args,
        "env": [
            {"name": "SUNK_CLUSTER_NAME", "value": ctx.cluster},
            {"name": "SUNK_MUNGED", "value": "external"},  # the munge sidecar runs it
            *(opts.env or []),
        ],
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": "/etc/slurm", "readOnly": True},
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
        ],
    }
    if opts.image.pullPolicy:
        container["imagePullPolicy"] = opts.image.pullPolicy
    container["resources"] = _resources(name, opts.resources)
    container["securityContext"] = opts.securityContext or copy.deepcopy(security)
    if port:
        container["ports"] = [{"name": name, "containerPort": port}]
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 10}
    return container


# Mounted ConfigMaps change in place (topology.conf on Node label changes, cli_filter.lua): tell
# slurmctld, which also sends them to the configless slurmds. Not job_submit.lua: the plugin
# rereads it by itself and keeps the previous script when the new one does not load, where a
# reconfigure (a restart in 24.11) would make slurmctld exit.
RECONFIGURE_LOOP = """\
last=""
while sleep 15; do
  now=$(cat /etc/slurm/*.conf /etc/slurm/cli_filter.lua 2>/dev/null | md5sum)
  if [ -n "$last" ] && [ "$now" != "$last" ]; then
    scontrol reconfigure && echo "configuration changed: scontrol reconfigure"
  fi
  last=$now
done
"""


def reconfigure_container(ctx: ClusterContext) -> dict[str, Any]:
    loop = ["/bin/sh", "-c", RECONFIGURE_LOOP]
    container = _container(ctx, "reconfigure", ctx.spec.controller, loop)
    container["resources"] = {
        "requests": {"cpu": "5m", "memory": "16Mi"},
        "limits": {"memory": "64Mi"},
    }
    container["securityContext"] = copy.deepcopy(RECONFIGURE_SECURITY_CONTEXT)
    return container


def _template(
    ctx: ClusterContext,
    component: str,
    opts: Any,
    spec: dict[str, Any],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    # Ours win: selectors and the NetworkPolicies tell the components apart by them.
    pod_labels = {**(opts.labels or {}), **labels(ctx, component)}
    pod_annotations = {**(opts.annotations or {}), **(annotations or {})}
    return {"metadata": {"labels": pod_labels, "annotations": pod_annotations}, "spec": spec}


def volume_claim(
    name: str, storage: PersistentStorage, claim_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A StatefulSet volumeClaimTemplate from a values `{storageClassName, size}` block."""
    claim: dict[str, Any] = {
        "metadata": {"name": name, **({"labels": claim_labels} if claim_labels else {})},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": str(storage.size)}},
        },
    }
    if storage.storageClassName:
        claim["spec"]["storageClassName"] = storage.storageClassName
    return claim


def service(
    ctx: ClusterContext,
    name: str,
    component: str,
    ports: list[tuple[str, int]],
    headless: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": selector(ctx, component),
        "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports],
    }
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(ctx, name, component),
        "spec": spec,
    }


def disruption_budget(
    ctx: ClusterContext, name: str, component: str, max_unavailable: int | str
) -> dict[str, Any]:
    """A PodDisruptionBudget over one component's Pods (its workload's selector). A Pod that is
    not Ready may always be evicted: a budget keeps a working daemon, not a broken one."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(ctx, name, component),
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": selector(ctx, component)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def config_maps(ctx: ClusterContext) -> list[dict[str, Any]]:
    apart = ("slurmdbd.conf", "topology.conf", SSSD_FILE, *CONTROLLER_FILES)
    files = {k: v for k, v in ctx.rendered.files.items() if k not in apart}
    out = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(ctx, names.config_map(ctx.cluster), "config"),
            "data": files,
        }
    ]
    if "topology.conf" in ctx.rendered.files:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(ctx, names.topology_map(ctx.cluster), "topology"),
                "data": {"topology.conf": ctx.rendered.files["topology.conf"]},
            }
        )
    if SSSD_FILE in ctx.rendered.files:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(ctx, names.sssd_map(ctx.cluster), "directory"),
                "data": {SSSD_FILE: ctx.rendered.files[SSSD_FILE]},
            }
        )
    login = ctx.spec.login
    if login.enabled and login.s6:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(ctx, names.login_s6_map(ctx.cluster), "login"),
                "data": s6.config_map_data(login.s6),
            }
        )
    # Lua scripts apart: job_submit.lua is the controller's alone (sunk.slurmconf.lua).
    lua = {k: v for k, v in ctx.rendered.files.items() if k in CONTROLLER_FILES}
    if lua:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(ctx, names.lua_map(ctx.cluster), "lua"),
                "data": lua,
            }
        )
    return out


def controller(ctx: ClusterContext) -> list[dict[str, Any]]:
    opts = ctx.spec.controller
    name = names.controller(ctx.cluster)
    container = _container(ctx, "slurmctld", opts, ["slurmctld"], 6817)
    container["volumeMounts"].append({"name": "state", "mountPath": "/var/spool/slurmctld"})
    volumes = [_config_volume(ctx, CONTROLLER_FILES, jwt_key=True)]
    pod = _pod_spec(ctx, opts, [container, reconfigure_container(ctx)], volumes)
    directory.attach(pod, directory.for_cluster(ctx.spec), {"slurmctld"})
    if ctx.spec.login.enabled:
        # srun and salloc on a login Pod give slurmctld their host name (the Pod's, e.g.
        # <cluster>-login-0) for its messages to them; it resolves only in the login Pods'
        # subdomain. Unresolved, slurmctld retries for 10 s per message and a job's completion
        # waits about a minute for the srun it cannot reach.
        pod["dnsConfig"] = {
            "searches": [f"{names.login_pods(ctx.cluster)}.{service_domain(ctx.namespace)}"]
        }
    _pod_security(pod, SLURM_UID)
    account = _account(ctx, pod, "controller")
    claim = volume_claim("state", opts.stateVolume, labels(ctx, "controller"))
    retain = "Retain" if opts.keepStateOnDelete else "Delete"
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(ctx, name, "controller"),
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": selector(ctx, "controller")},
            "template": _template(
                ctx, "controller", opts, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
            ),
            "volumeClaimTemplates": [claim],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": retain, "whenScaled": "Retain"},
        },
    }
    out = [
        account,
        statefulset,
        service(ctx, name, "controller", [("slurmctld", 6817)], headless=True),
    ]
    if opts.podDisruptionBudget.enabled:  # one replica: a drain waits for an admin
        out.append(disruption_budget(ctx, name, "controller", 0))
    return out


def accounting(ctx: ClusterContext) -> list[dict[str, Any]]:
    acct = ctx.spec.accounting
    if not acct.enabled:
        return []
    name = names.accounting(ctx.cluster)
    container = _container(ctx, "slurmdbd", acct, ["slurmdbd"], 6819)
    container["volumeMounts"].append(
        {"name": "slurmdbd-conf", "mountPath": "/etc/slurmdbd", "readOnly": True}
    )
    container["env"].append({"name": "SUNK_SLURMDBD_CONF", "value": "/etc/slurmdbd/slurmdbd.conf"})
    endpoints = Endpoints.for_cluster(ctx.spec, ctx.namespace)
    if endpoints.storage_host:
        container["env"].append(
            {"name": "SUNK_DB_WAIT", "value": f"{endpoints.storage_host}:{endpoints.storage_port}"}
        )
    volumes = [
        _config_volume(ctx, jwt_key=True),
        {
            "name": "slurmdbd-conf",
            "secret": {"secretName": names.dbd_secret(ctx.cluster), "defaultMode": 0o400},
        },
    ]
    pod = _pod_spec(ctx, acct, [container], volumes, hostname=name)
    # slurmdbd runs as slurm and reads the JWT key (mode 0400) from the projected config volume
    _pod_security(pod, SLURM_UID)
    account = _account(ctx, pod, "accounting")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(ctx, name, "accounting"),
        "spec": {
            "replicas": acct.replicas,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(ctx, "accounting")},
            "template": _template(
                ctx, "accounting", acct, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
            ),
        },
    }
    return [
        account,
        deployment,
        service(ctx, name, "accounting", [("slurmdbd", 6819)]),
        *database(ctx),
    ]


def database(ctx: ClusterContext) -> list[dict[str, Any]]:
    db = ctx.spec.accounting.database
    if ctx.spec.accounting.database_kind() == "external":
        return []
    secret_name, secret_key = ctx.db_password_secret or (names.db_secret(ctx.cluster), "password")
    if db.type == "moco":
        return [moco_cluster(ctx)]
    name = names.mariadb(ctx.cluster)
    maria = db.mariadb
    env = [
        {"name": "MARIADB_DATABASE", "value": db.name},
        {"name": "MARIADB_USER", "value": "slurm"},
        {
            "name": "MARIADB_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": secret_name, "key": secret_key}},
        },
        # Never MARIADB_RANDOM_ROOT_PASSWORD: the image prints the password it generates.
        {
            "name": "MARIADB_ROOT_PASSWORD",
            "valueFrom": {
                "secretKeyRef": {"name": names.db_root_secret(ctx.cluster), "key": "password"}
            },
        },
    ]
    container: dict[str, Any] = {
        "name": "mariadb",
        "image": image_ref(maria.image, ctx.spec.global_.imageRegistry),
        "env": env,
        "ports": [{"name": "mysql", "containerPort": 3306}],
        "readinessProbe": {"tcpSocket": {"port": 3306}, "periodSeconds": 10},
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}],
        "resources": _resources("mariadb", maria.resources),
        "securityContext": copy.deepcopy(ROOT_THEN_USER_SECURITY_CONTEXT),
    }
    if maria.image.pullPolicy:
        container["imagePullPolicy"] = maria.image.pullPolicy
    claim = volume_claim("data", maria.storage, labels(ctx, "database"))
    pod: dict[str, Any] = {
        "containers": [container],
        "tolerations": [names.LOCK_TOLERATION],
        "automountServiceAccountToken": False,
        "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
    }
    account = _account(ctx, pod, "database")
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(ctx, name, "database"),
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": selector(ctx, "database")},
            "template": {"metadata": {"labels": labels(ctx, "database")}, "spec": pod},
            "volumeClaimTemplates": [claim],
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
        },
    }
    return [account, statefulset, service(ctx, name, "database", [("mysql", 3306)])]


def moco_cluster(ctx: ClusterContext) -> dict[str, Any]:
    moco = ctx.spec.accounting.database.moco
    mysqld: dict[str, Any] = {
        "name": "mysqld",
        "image": image_ref(moco.image, ctx.spec.global_.imageRegistry),
    }
    if moco.image.pullPolicy:
        mysqld["imagePullPolicy"] = moco.image.pullPolicy
    if moco.resources:
        mysqld["resources"] = moco.resources.model_dump(exclude_none=True)
    claim = volume_claim("mysql-data", moco.storage)
    return {
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": meta(ctx, names.accounting(ctx.cluster), "database"),
        "spec": {
            "replicas": moco.replicas,
            "podTemplate": {
                "spec": {"containers": [mysqld], "tolerations": [names.LOCK_TOLERATION]}
            },
            "volumeClaimTemplates": [claim],
        },
    }


def rest(ctx: ClusterContext) -> list[dict[str, Any]]:
    opts = ctx.spec.rest
    if not opts.enabled:
        return []
    name = names.rest(ctx.cluster)
    container = _container(
        ctx, "slurmrestd", opts, ["slurmrestd"], 6820, SLURMRESTD_SECURITY_CONTEXT
    )
    pod = _pod_spec(ctx, opts, [container], [_config_volume(ctx)])
    _pod_security(pod)
    account = _account(ctx, pod, "rest")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(ctx, name, "rest"),
        "spec": {
            "replicas": opts.replicas,
            "selector": {"matchLabels": selector(ctx, "rest")},
            "template": _template(
                ctx, "rest", opts, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
            ),
        },
    }
    return [
        account,
        deployment,
        service(ctx, name, "rest", [("slurmrestd", 6820)]),
    ]


def login(ctx: ClusterContext) -> list[dict[str, Any]]:
    """The login StatefulSet and its Services. `global.volumes`/`volumeMounts` under
    `login.volumes`/`volumeMounts` (sunk.operator.shared_volumes) go on the `sshd` container;
    raises VolumeConfigError when they cannot be merged."""
    opts = ctx.spec.login
    if not opts.enabled:
        return []
    shared = shared_volumes.merge_login(ctx.spec, ctx.name)
    if shared.problems:
        raise shared_volumes.VolumeConfigError(shared.problems)
    name = names.login(ctx.cluster)
    container = _container(ctx, "sshd", opts, ["sshd"], 22, SSHD_SECURITY_CONTEXT)
    container["volumeMounts"].append(
        {"name": "host-keys", "mountPath": "/etc/ssh/host-keys-secret", "readOnly": True}
    )
    volumes = [
        _config_volume(ctx, CLIENT_FILES),
        {
            "name": "host-keys",
            "secret": {"secretName": names.hostkeys_secret(ctx.cluster), "defaultMode": 0o400},
        },
        *shared.volumes,
    ]
    pod = _pod_spec(ctx, opts, [container], volumes)
    _pod_security(pod)
    sssd = directory.for_cluster(ctx.spec)
    if sssd is not None:
        container["env"].append(dict(directory.LOGIN_ENV))
        directory.attach(pod, sssd, {"sshd"})
    account = _account(ctx, pod, "login")
    template_annotations = {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
    if opts.s6:  # sshd listens once the oneshots are done: its TCP probe tells readiness
        s6.attach(pod, "sshd", names.login_s6_map(ctx.cluster), probe=False)
        template_annotations[names.ANN_S6_HASH] = stable_hash(s6.hash_input(opts.s6), 10)
    statefulset: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(ctx, name, "login"),
        "spec": {
            "replicas": opts.replicas,
            "serviceName": names.login_pods(ctx.cluster),
            "selector": {"matchLabels": selector(ctx, "login")},
            "template": _template(ctx, "login", opts, pod, template_annotations),
        },
    }
    if opts.sshKeyVolume:
        statefulset["spec"]["volumeClaimTemplates"] = [volume_claim("ssh-keys", opts.sshKeyVolume)]
        container["volumeMounts"].append({"name": "ssh-keys", "mountPath": "/etc/ssh/user-keys"})
    container["volumeMounts"] += shared.mounts
    svc = service(ctx, name, "login", [("ssh", opts.service.port)])
    svc["spec"]["ports"][0]["targetPort"] = 22
    svc["spec"]["type"] = opts.service.type
    svc["metadata"]["annotations"] = dict(opts.service.annotations)
    if opts.service.type != "ClusterIP":
        if opts.service.externalTrafficPolicy:
            svc["spec"]["externalTrafficPolicy"] = opts.service.externalTrafficPolicy
        if opts.service.loadBalancerSourceRanges:
            svc["spec"]["loadBalancerSourceRanges"] = list(opts.service.loadBalancerSourceRanges)
    pods_service = service(
        ctx, names.login_pods(ctx.cluster), "login", [("ssh", 22)], headless=True
    )
    out = [account, statefulset, svc, pods_service]
    if _login_budget(opts):
        out.append(disruption_budget(ctx, name, "login", opts.podDisruptionBudget.maxUnavailable))
    return out


def desired_objects(ctx: ClusterContext, with_login: bool = True) -> list[dict[str, Any]]:
    """Every owned control-plane object, in apply order; ``with_login=False`` leaves the login
    objects out (their volumes do not merge: the running ones are left as they are)."""
    slurmd = service_account(ctx.namespace, ctx.cluster, "slurmd", ctx.name, ctx.uid)
    return [
        *config_maps(ctx),
        slurmd,
        *controller(ctx),
        *accounting(ctx),
        *rest(ctx),
        *(login(ctx) if with_login else []),
    ]


def _login_budget(login: Any) -> bool:
    """One login Pod gets no budget: maxUnavailable 1 would let every drain through anyway."""
    return login.enabled and login.podDisruptionBudget.enabled and login.replicas > 1


def disruption_budgets_off(ctx: ClusterContext) -> list[str]:
    """Names of the cluster's PodDisruptionBudgets its spec does not ask for (switched off, or
    login down to one replica): the reconcile deletes them if they exist."""
    off = []
    if not ctx.spec.controller.podDisruptionBudget.enabled:
        off.append(names.controller(ctx.cluster))
    if not _login_budget(ctx.spec.login):
        off.append(names.login(ctx.cluster))
    return off


def slurmdbd_secret(ctx: ClusterContext) -> dict[str, Any] | None:
    text = ctx.rendered.files.get("slurmdbd.conf")
    if text is None:
        return None
    from sunk.operator.cluster.keys import b64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": meta(ctx, names.dbd_secret(ctx.cluster), "accounting"),
        "data": {"slurmdbd.conf": b64(text.encode())},
    }
