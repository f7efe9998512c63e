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
    deployment,
    pod_account,
    pod_security,
    pod_spec,
    service,
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
    return [
        account,
        deployment(ctx, name, "rest", opts, pod, opts.replicas),
        service(ctx, name, "rest", [("slurmrestd", 6820)]),
    ]
