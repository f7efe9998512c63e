"""The Slurm controller: slurmctld's StatefulSet (with the loop that reconfigures it when its
mounted configuration changes), its Service and PodDisruptionBudget, and the cluster's
ConfigMaps (slurm.conf and the other rendered files, topology.conf, sssd.conf, the login Pods'
s6 services, the Lua scripts).

Apart from the other components (sunk.operator.cluster.objects assembles them): the controller
is the one every cluster has, and the ConfigMaps go with it, as slurmctld serves the
configuration to the configless slurmds and is reconfigured when it changes.
"""

from __future__ import annotations

import copy
from typing import Any

from sunk.models.crds import SlurmClusterSpec
from sunk.models.k8s import image_ref
from sunk.operator import directory, names, s6
from sunk.operator.cluster.base import (
    SLURM_UID,
    SLURM_USER_SECURITY_CONTEXT,
    ClusterContext,
    config_volume,
    daemon_container,
    disruption_budget,
    labels,
    meta,
    pod_account,
    pod_security,
    pod_spec,
    selector,
    service,
    template,
    volume_claim,
)
from sunk.operator.common import MUNGE_UID, non_root
from sunk.slurmconf import size
from sunk.slurmconf.guard import find_key
from sunk.slurmconf.inputs import service_domain
from sunk.slurmconf.lua import CONTROLLER_FILES

# The reconfigure loop starts as SlurmUser, whom slurmctld lets reconfigure.
RECONFIGURE_SECURITY_CONTEXT = non_root(SLURM_UID)


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


STATE_DIR = "/var/spool/slurmctld"
# The state volume's root belongs to whoever made it: fsGroup reaches block volumes, not a
# hostPath or an NFS export. So a one-shot container gives it to SlurmUser, as root with the
# CHOWN capability alone, and slurmctld itself starts as SlurmUser.
STATE_OWNER_SECURITY_CONTEXT = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
}


def state_owner(ctx: ClusterContext) -> dict[str, Any]:
    opts = ctx.spec.controller
    container: dict[str, Any] = {
        "name": "state-owner",
        "image": image_ref(opts.image, ctx.spec.global_.imageRegistry),
        "args": ["chown", f"{SLURM_UID}:{SLURM_UID}", STATE_DIR],
        "volumeMounts": [{"name": "state", "mountPath": STATE_DIR}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": copy.deepcopy(STATE_OWNER_SECURITY_CONTEXT),
    }
    if opts.image.pullPolicy:
        container["imagePullPolicy"] = opts.image.pullPolicy
    return container


def reconfigure_container(ctx: ClusterContext) -> dict[str, Any]:
    loop = ["/bin/sh", "-c", RECONFIGURE_LOOP]
    container = daemon_container(
        ctx, "reconfigure", ctx.spec.controller, loop, None, RECONFIGURE_SECURITY_CONTEXT
    )
    container["resources"] = {
        "requests": {"cpu": "5m", "memory": "16Mi"},
        "limits": {"memory": "64Mi"},
    }
    # not the controller's `securityContext`, which is slurmctld's
    container["securityContext"] = copy.deepcopy(RECONFIGURE_SECURITY_CONTEXT)
    return container


def config_maps(ctx: ClusterContext) -> list[dict[str, Any]]:
    # One ConfigMap per group of the renderer's size check (sunk.slurmconf.size), which
    # measures each as the API server will: the main one always, the others when rendered.
    # slurmdbd.conf travels in a Secret (sunk.operator.cluster.accounting).
    groups = size.grouped(ctx.rendered.files)

    def config_map(group: str, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(ctx, name, group),
            "data": groups.get(group, {}),
        }

    out = [config_map(size.SHARED, names.config_map(ctx.cluster))]
    if "topology" in groups:
        out.append(config_map("topology", names.topology_map(ctx.cluster)))
    if "directory" in groups:
        out.append(config_map("directory", names.sssd_map(ctx.cluster)))
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
    if "lua" in groups:
        out.append(config_map("lua", names.lua_map(ctx.cluster)))
    return out


# Whether this Pod's slurmctld answers, not whether its port accepts: the kernel completes a
# TCP handshake for a stopped or deadlocked process, so a hung controller passed the TCP probe
# and stayed Ready. `scontrol ping` pings every SlurmctldHost in turn, waits for each reply (up
# to MessageTimeout) and prints "Slurmctld(primary) at <host> is UP" or "... is DOWN" per
# controller; a standby answers too. Only this Pod's own line counts: with HA, a hung primary
# must not pass on its standby's answer, and a standby must not fail because the primary hangs
# (so the bound leaves room for every controller's timeout).
SLURMCTLD_PING = 'timeout {seconds} scontrol ping | grep -q " at $(hostname) is UP"'
DEFAULT_MESSAGE_TIMEOUT = 10
# Loading a large saved state takes a while: up to 5 minutes before the first answer.
STARTUP_BOUND = {"periodSeconds": 10, "failureThreshold": 30}
# A hung slurmctld is restarted after 4 unanswered pings 15 s apart: within about 75 s
# (README, "What happens when…"). Jobs keep running on their nodes meanwhile.
LIVENESS_BOUND = {"periodSeconds": 15, "failureThreshold": 4}


def message_timeout(spec: SlurmClusterSpec) -> int:
    """slurmConfig's MessageTimeout (any case), else Slurm's default."""
    user = dict(spec.slurmConfig.model_extra or {})
    key = find_key(user, "MessageTimeout")
    try:
        return int(str(user[key])) if key else DEFAULT_MESSAGE_TIMEOUT
    except ValueError:
        return DEFAULT_MESSAGE_TIMEOUT


def slurmctld_answers(spec: SlurmClusterSpec) -> dict[str, Any]:
    """The exec probe of a controller Pod: its own slurmctld answered a ping."""
    seconds = message_timeout(spec) * spec.controller.controllers() + 2
    command = SLURMCTLD_PING.format(seconds=seconds)
    return {"exec": {"command": ["/bin/sh", "-c", command]}, "timeoutSeconds": seconds + 2}


def controller(ctx: ClusterContext) -> list[dict[str, Any]]:
    opts = ctx.spec.controller
    name = names.controller(ctx.cluster)
    container = daemon_container(
        ctx, "slurmctld", opts, ["slurmctld"], 6817, SLURM_USER_SECURITY_CONTEXT
    )
    container["volumeMounts"].append({"name": "state", "mountPath": STATE_DIR})
    answers = slurmctld_answers(ctx.spec)
    container["startupProbe"] = {**answers, **STARTUP_BOUND}
    container["livenessProbe"] = {**answers, **LIVENESS_BOUND}
    volumes = [config_volume(ctx, CONTROLLER_FILES, jwt_key=True)]
    pod = pod_spec(ctx, opts, [container, reconfigure_container(ctx)], volumes, munge_uid=MUNGE_UID)
    pod["initContainers"] = [state_owner(ctx)]
    directory.attach(pod, directory.for_cluster(ctx.spec), {"slurmctld"})
    if ctx.spec.login.enabled:
        # srun and salloc on a login Pod give slurmctld their host name (the Pod's, e.g.
        # <cluster>-login-0) for its messages to them; it resolves only in the login Pods'
        # subdomain. Unresolved, slurmctld retries for 10 s per message and a job's completion
        # waits about a minute for the srun it cannot reach.
        pod["dnsConfig"] = {
            "searches": [f"{names.login_pods(ctx.cluster)}.{service_domain(ctx.namespace)}"]
        }
    pod_security(pod, SLURM_UID)
    account = pod_account(ctx, pod, "controller")
    claim = volume_claim("state", opts.stateVolume, labels(ctx, "controller"))
    out = [account]
    if opts.ha.enabled:
        # one claim that every controller mounts: a standby takes over from the saved state
        state_claim = names.controller_state(ctx.cluster)
        pod["volumes"].append(
            {"name": "state", "persistentVolumeClaim": {"claimName": state_claim}}
        )
        pod["affinity"] = apart_from_each_other(ctx, pod.get("affinity"))
        keep = opts.keepStateOnDelete
        claim["metadata"] = meta(ctx, state_claim, "controller", owned=not keep)
        out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim})
    spec: dict[str, Any] = {
        "replicas": opts.controllers(),
        "serviceName": name,
        "selector": {"matchLabels": selector(ctx, "controller")},
        "template": template(
            ctx, "controller", opts, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
        ),
    }
    if not opts.ha.enabled:
        retain = "Retain" if opts.keepStateOnDelete else "Delete"
        spec["volumeClaimTemplates"] = [claim]
        spec["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": retain,
            "whenScaled": "Retain",
        }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(ctx, name, "controller"),
        "spec": spec,
    }
    out += [statefulset, service(ctx, name, "controller", [("slurmctld", 6817)], headless=True)]
    if opts.podDisruptionBudget.enabled:
        # one controller: a drain waits for an admin; with HA, one controller at a time
        out.append(disruption_budget(ctx, name, "controller", 1 if opts.ha.enabled else 0))
    return out


def apart_from_each_other(ctx: ClusterContext, affinity: dict[str, Any] | None) -> dict[str, Any]:
    """``affinity`` with the controllers on different Nodes (required: a standby on the
    primary's Node would fail with it, so it waits Pending, visibly, for a Node of its own)."""
    affinity = copy.deepcopy(affinity) if affinity else {}
    anti = affinity.setdefault("podAntiAffinity", {})
    anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        {
            "labelSelector": {"matchLabels": selector(ctx, "controller")},
            "topologyKey": "kubernetes.io/hostname",
        }
    )
    return affinity
