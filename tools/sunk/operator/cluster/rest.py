"""slurmrestd, Slurm's REST API: its Deployment and Service.

Apart from the other components (sunk.operator.cluster.objects assembles them): it is optional
and, unlike the other daemons, starts as its own user.
"""

from __future__ import annotations

from typing import Any

from sunk.operator import names
from sunk.operator.cluster.base import (
    SLURMRESTD_UID,
    ClusterContext,
    config_volume,
    daemon_container,
    meta,
    pod_account,
    pod_security,
    pod_spec,
    selector,
    service,
    template,
)
from sunk.operator.common import MUNGE_UID, non_root

# slurmrestd owns nothing and reads only slurm.conf and the munge socket: it starts as its own
# user, which is neither root nor SlurmUser (it refuses both).
SLURMRESTD_SECURITY_CONTEXT = non_root(SLURMRESTD_UID)


def rest(ctx: ClusterContext) -> list[dict[str, Any]]:
    opts = ctx.spec.rest
    if not opts.enabled:
        return []
    name = names.rest(ctx.cluster)
    container = daemon_container(
        ctx, "slurmrestd", opts, ["slurmrestd"], 6820, SLURMRESTD_SECURITY_CONTEXT
    )
    pod = pod_spec(ctx, opts, [container], [config_volume(ctx)], munge_uid=MUNGE_UID)
    pod_security(pod, MUNGE_UID)  # the munge sidecar reads its key through the group
    account = pod_account(ctx, pod, "rest")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(ctx, name, "rest"),
        "spec": {
            "replicas": opts.replicas,
            "selector": {"matchLabels": selector(ctx, "rest")},
            "template": template(
                ctx, "rest", opts, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
            ),
        },
    }
    return [
        account,
        deployment,
        service(ctx, name, "rest", [("slurmrestd", 6820)]),
    ]
