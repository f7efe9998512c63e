"""The NetworkPolicies of one Slurm cluster (`networkPolicy`): ingress only, so DNS, LDAP, NFS
and the operator's lock hook stay reachable from the Pods.

- ``<cluster>-slurm``: every Pod of the cluster but MariaDB takes connections from the
  cluster's own Pods on any port (slurmctld, slurmd, slurmdbd, srun's and MPI's ephemeral
  ports), plus ``slurmFrom``.
- ``<cluster>-login-ssh``: sshd (22) on the login Pods from ``sshFrom`` (empty: anyone).
- ``<cluster>-rest``: slurmrestd (6820) from the operator's Pods (the Syncer and the Pod
  Scheduler call it) and ``restFrom``.
- ``<cluster>-database``: the in-cluster MariaDB (3306) from slurmdbd only.

Peers are chosen by labels, so the namespace is the trust boundary: whoever may create Pods in
it may label one as the cluster's.
"""

from __future__ import annotations

from typing import Any

from sunk.operator import names
from sunk.operator.cluster.base import ClusterContext, meta, selector

# The operator's Pods as the sunk chart labels them; its namespace comes from POD_NAMESPACE.
OPERATOR_POD_LABELS = {
    "app.kubernetes.io/part-of": "sunk",
    names.LABEL_COMPONENT: "operator",
}
METADATA_NAME = "kubernetes.io/metadata.name"  # the namespace label the API server sets


def operator_peer(namespace: str | None) -> dict[str, Any] | None:
    """The operator's Pods as a NetworkPolicy peer; None when it runs outside a Pod."""
    if not namespace:
        return None
    return {
        "namespaceSelector": {"matchLabels": {METADATA_NAME: namespace}},
        "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)},
    }


def policy_names(cluster: str) -> tuple[str, ...]:
    """Every NetworkPolicy the operator may make for ``cluster``."""
    return tuple(f"{cluster}-{suffix}" for suffix in ("slurm", "login-ssh", "rest", "database"))


def _policy(
    ctx: ClusterContext, suffix: str, component: str, pods: dict[str, Any], rule: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(ctx, f"{ctx.cluster}-{suffix}", component),
        "spec": {"podSelector": pods, "policyTypes": ["Ingress"], "ingress": [rule]},
    }


def _tcp(port: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port}]


def network_policies(ctx: ClusterContext, operator: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The policies ``ctx``'s spec asks for; ``operator`` is the operator's peer (or None)."""
    opts = ctx.spec.networkPolicy
    if not opts.enabled:
        return []
    cluster = {names.LABEL_CLUSTER: ctx.cluster}
    not_database = {
        "matchLabels": cluster,
        "matchExpressions": [
            {"key": names.LABEL_COMPONENT, "operator": "NotIn", "values": ["database"]}
        ],
    }
    own_pods = {"podSelector": {"matchLabels": cluster}}
    out = [
        _policy(
            ctx,
            "slurm",
            "cluster",
            not_database,
            {"from": [own_pods, *(p.manifest() for p in opts.slurmFrom)]},
        ),
    ]
    if ctx.spec.login.enabled:
        rule: dict[str, Any] = {"ports": _tcp(22)}
        if opts.sshFrom:
            rule["from"] = [p.manifest() for p in opts.sshFrom]
        out.append(
            _policy(ctx, "login-ssh", "login", {"matchLabels": selector(ctx, "login")}, rule)
        )
    rest_from = [p.manifest() for p in opts.restFrom]
    if operator is not None:
        rest_from.insert(0, operator)
    if ctx.spec.rest.enabled and rest_from:
        out.append(
            _policy(
                ctx,
                "rest",
                "rest",
                {"matchLabels": selector(ctx, "rest")},
                {"from": rest_from, "ports": _tcp(6820)},
            )
        )
    if ctx.spec.accounting.enabled and ctx.spec.accounting.database_kind() == "mariadb":
        slurmdbd = {"podSelector": {"matchLabels": selector(ctx, "accounting")}}
        out.append(
            _policy(
                ctx,
                "database",
                "database",
                {"matchLabels": selector(ctx, "database")},
                {"from": [slurmdbd], "ports": _tcp(3306)},
            )
        )
    return out
