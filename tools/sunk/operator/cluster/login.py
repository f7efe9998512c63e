"""The login Pods users SSH into: sshd's StatefulSet, its Services (the user-facing one and the
headless one that names each Pod) and PodDisruptionBudget.

Apart from the other components (sunk.operator.cluster.objects assembles them): the login Pods
alone take the shared volumes, the s6 services and sshd's capabilities.
"""

from __future__ import annotations

from typing import Any

from sunk.operator import directory, names, s6, shared_volumes
from sunk.operator.cluster.base import (
    ClusterContext,
    config_volume,
    daemon_container,
    disruption_budget,
    meta,
    pod_account,
    pod_security,
    pod_spec,
    selector,
    service,
    template,
    volume_claim,
)
from sunk.operator.hashing import stable_hash
from sunk.slurmconf.lua import CLIENT_FILES

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
    container = daemon_container(ctx, "sshd", opts, ["sshd"], 22, SSHD_SECURITY_CONTEXT)
    container["volumeMounts"].append(
        {"name": "host-keys", "mountPath": "/etc/ssh/host-keys-secret", "readOnly": True}
    )
    volumes = [
        config_volume(ctx, CLIENT_FILES),
        {
            "name": "host-keys",
            "secret": {"secretName": names.hostkeys_secret(ctx.cluster), "defaultMode": 0o400},
        },
        *shared.volumes,
    ]
    pod = pod_spec(ctx, opts, [container], volumes)
    pod_security(pod)
    sssd = directory.for_cluster(ctx.spec)
    if sssd is not None:
        container["env"].append(dict(directory.LOGIN_ENV))
        directory.attach(pod, sssd, {"sshd"})
    account = pod_account(ctx, pod, "login")
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
            "template": template(ctx, "login", opts, pod, template_annotations),
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
    if login_budget(opts):
        out.append(disruption_budget(ctx, name, "login", opts.podDisruptionBudget.maxUnavailable))
    return out


def login_budget(login: Any) -> bool:
    """One login Pod gets no budget: maxUnavailable 1 would let every drain through anyway."""
    return login.enabled and login.podDisruptionBudget.enabled and login.replicas > 1
