"""Slurm accounting: slurmdbd's Deployment and Service, the Secret of its slurmdbd.conf (it
holds the database password), and its database when the cluster runs one (a MariaDB
StatefulSet, or a MOCO MySQLCluster).

Apart from the other components (sunk.operator.cluster.objects assembles them): accounting is
optional and brings its own database, with its own image, storage and security context.
"""

from __future__ import annotations

import copy
from typing import Any

from sunk.models.k8s import image_ref
from sunk.operator import names
from sunk.operator.cluster.base import (
    SLURM_UID,
    SLURM_USER_SECURITY_CONTEXT,
    ClusterContext,
    config_volume,
    daemon_container,
    deployment,
    labels,
    meta,
    pod_account,
    pod_security,
    pod_spec,
    resources,
    selector,
    service,
    volume_claim,
)
from sunk.operator.common import (
    MUNGE_UID,
    POD_SECURITY_CONTEXT,
    ROOT_THEN_USER_SECURITY_CONTEXT,
)
from sunk.slurmconf import Endpoints


def accounting(ctx: ClusterContext) -> list[dict[str, Any]]:
    acct = ctx.spec.accounting
    if not acct.enabled:
        return []
    name = names.accounting(ctx.cluster)
    container = daemon_container(
        ctx, "slurmdbd", acct, ["slurmdbd"], 6819, SLURM_USER_SECURITY_CONTEXT
    )
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
        config_volume(ctx, jwt_key=True),
        {
            "name": "slurmdbd-conf",
            "secret": {"secretName": names.dbd_secret(ctx.cluster), "defaultMode": 0o400},
        },
    ]
    pod = pod_spec(ctx, acct, [container], volumes, hostname=name, munge_uid=MUNGE_UID)
    # slurmdbd runs as slurm and reads slurmdbd.conf and the JWT key (mode 0400, 0440 with the
    # fsGroup), munge its key
    pod_security(pod, SLURM_UID)
    account = pod_account(ctx, pod, "accounting")
    return [
        account,
        deployment(ctx, name, "accounting", acct, pod, acct.replicas, {"type": "Recreate"}),
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
        "resources": resources("mariadb", maria.resources),
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
    account = pod_account(ctx, pod, "database")
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
