"""Desired control-plane objects of one SlurmCluster: the components' objects assembled in
apply order, and the PodDisruptionBudgets the spec does not ask for.

Each component is built in its own module: the controller and the ConfigMaps in
sunk.operator.cluster.controller, slurmdbd and its database in sunk.operator.cluster.accounting,
slurmrestd in sunk.operator.cluster.rest, the login Pods in sunk.operator.cluster.login; what
they share (ClusterContext, labels, the daemon container and Pod spec) in
sunk.operator.cluster.base.

Every object carries the standard labels and an owner reference to the SlurmCluster (so it
is garbage-collected with it) — except what holds state: key Secrets (no owner) and PVCs
(StatefulSet volume claims, retained unless `controller.keepStateOnDelete` is false).
"""

from __future__ import annotations

from typing import Any

from sunk.operator import names
from sunk.operator.cluster.accounting import accounting
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.controller import config_maps, controller
from sunk.operator.cluster.login import login, login_budget
from sunk.operator.cluster.rest import rest
from sunk.operator.common import service_account


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


def disruption_budgets_off(ctx: ClusterContext) -> list[str]:
    """Names of the cluster's PodDisruptionBudgets its spec does not ask for (switched off, or
    login down to one replica): the reconcile deletes them if they exist."""
    off = []
    if not ctx.spec.controller.podDisruptionBudget.enabled:
        off.append(names.controller(ctx.cluster))
    if not login_budget(ctx.spec.login):
        off.append(names.login(ctx.cluster))
    return off
