"""The decision for every SUNK 7.x `slurm` chart key: carried, renamed, dropped or refused.

One table, `table()`, keyed by the 7.x key path (dotted; `*` is any one map key). The most
specific pattern wins; a key no pattern names is refused, since we cannot tell what it meant.
Sources: the SUNK reference (docs/…/sunk.md §2, §6.1), sunk-anywhere's values files and the
older quickstart values (doc-examples). `sunkctl migrate` walks a file through this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from sunk.migrate.context import Action, Level, Migration, Path, kind
from sunk.models.values import ENROOT_OPTIONS, PodOptions

Handler = Callable[[Migration, Path, Any, Path], None]


@dataclass(frozen=True)
class Decision:
    action: str  # carry | section | rename | drop | fail | handler
    why: str = ""
    target: str | None = None  # rename: the dotted key in our chart
    level: Level = Level.NOTE  # drop: WARNING when behaviour changes
    handler: Handler | None = None


CARRY = Decision("carry")
SECTION = Decision("section")  # a map whose keys are decided one by one


def rename(target: str, why: str = "") -> Decision:
    return Decision("rename", why, target)


def drop(why: str, level: Level = Level.NOTE) -> Decision:
    return Decision("drop", why, level=level)


def refuse(why: str) -> Decision:
    return Decision("fail", why)


def handled(handler: Handler, why: str) -> Decision:
    return Decision("handler", why, handler=handler)


# --------------------------------------------------------------------------- the walk


def decision(path: Path) -> Decision | None:
    """The table's decision for a concrete 7.x key path (most specific pattern first)."""
    best: tuple[int, Decision] | None = None
    for pattern, choice in table().items():
        parts = pattern.split(".")
        if len(parts) != len(path):
            continue
        if all(p == "*" or p == str(k) for p, k in zip(parts, path, strict=True)):
            wildcards = parts.count("*")
            if best is None or wildcards < best[0]:
                best = (wildcards, choice)
    return best[1] if best else None


def walk(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """Carry one 7.x key (`src`) to our key `dst` by its decision."""
    choice = decision(src)
    if choice is None:
        m.fail(
            src,
            "not a SUNK 7.x key this migration knows; its meaning cannot be carried",
            "remove it, or move it by hand to a key of charts/slurm/values.yaml",
        )
        return
    if choice.action == "carry":
        m.put(src, dst, value)
    elif choice.action == "section":
        section(m, src, value, dst)
    elif choice.action == "rename":
        assert choice.target is not None
        m.rename(src, tuple(choice.target.split(".")), value, choice.why)
    elif choice.action == "drop":
        m.drop(src, choice.why, choice.level)
    elif choice.action == "fail":
        m.fail(src, choice.why)
    else:
        assert choice.handler is not None
        choice.handler(m, src, value, dst)


def section(m: Migration, src: Path, value: Any, dst: Path) -> None:
    body = m.mapping(src, value)
    for key in sorted(body or {}, key=str):
        walk(m, (*src, key), body[key], (*dst, key))


# --------------------------------------------------------------------------- small handlers


def _off_or_refuse(why_on: str, hint: str, why_off: str) -> Handler:
    """A switched subchart or feature: refused while `enabled: true`, else dropped whole."""

    def handler(m: Migration, src: Path, value: Any, dst: Path) -> None:
        body = m.mapping(src, value)
        if body is None:
            return
        if body.get("enabled") is True:
            m.fail((*src, "enabled"), why_on, hint)
        else:
            m.drop(src, why_off)

    return handler


def _set_only(why: str, hint: str) -> Handler:
    """A reference (a ConfigMap, a list of extra objects) that cannot be carried: empty or
    null is dropped, anything else refused."""

    def handler(m: Migration, src: Path, value: Any, dst: Path) -> None:
        if value in (None, "", [], {}):
            m.drop(src, "empty; nothing to carry")
        else:
            m.fail(src, why, hint)

    return handler


def _single_controller(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if value in (None, 1):
        m.drop(src, "one slurmctld, as here; standbys are controller.ha")
    else:
        m.fail(src, f"{value!r} controllers: 7.x ran one", "use controller.ha.{enabled,backups}")


def _node_affinity(m: Migration, src: Path, value: Any, dst: Path) -> None:
    if value is None:
        m.drop(src, "null cleared the 7.x chart's CoreWeave node affinity; this chart sets none")
    elif isinstance(value, dict):
        m.rename(src, ("global", "affinity"), value, "the control-plane pods' affinity")
    else:
        m.fail(src, f"expected a Kubernetes Affinity map, not {kind(value)}")


def _switch_to_compute(name: str) -> Handler:
    """Top-level `autoPartition`/`cacheDropper`: their switch is `compute.<name>.enabled`."""

    def handler(m: Migration, src: Path, value: Any, dst: Path) -> None:
        body = m.mapping(src, value)
        for key in sorted(body or {}):
            if key == "enabled":
                m.rename((*src, key), ("compute", name, "enabled"), body[key])
            else:
                m.drop((*src, key), f"settings of the 7.x {name} component, which we do not run")

    return handler


EXTERNAL_TRAFFIC_POLICY = ("login", "service", "externalTrafficPolicy")


def _traffic_policy(m: Migration, src: Path, value: Any, dst: Path) -> None:
    service = m.doc.data.get("login", {}).get("service", {})
    if service.get("type") not in ("LoadBalancer", "NodePort"):
        m.drop(src, "a ClusterIP Service takes none (the API server refuses one)")
    elif value in ("", None):
        m.rename(src, dst, "Cluster", "empty meant Kubernetes' default, Cluster")
    else:
        m.put(src, dst, value)


def login_service(m: Migration) -> None:
    """7.x exposed the login Service as a LoadBalancer unless told otherwise; ours is a
    ClusterIP by default, so a file that names no type changes what users reach."""
    login = m.doc.data.get("login")
    login = login if isinstance(login, dict) else {}
    service = login.get("service") if isinstance(login.get("service"), dict) else {}
    if login.get("enabled") is False or service.get("type"):
        return
    m.note(
        Action.NOTICE,
        Level.WARNING,
        ("login",) if "login" in m.doc.data else (),
        "login.service.type is not set: 7.x's default was LoadBalancer, this chart's is "
        "ClusterIP (sshd is then not reachable from outside the cluster)",
        "set login.service.type: LoadBalancer and loadBalancerSourceRanges to keep the 7.x address",
    )


def _annotations(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """Service annotations key by key, so `metadata.global.annotations` merges with them."""
    body = m.mapping(src, value)
    target = ("login", "service", "annotations")
    for key in sorted(body or {}):
        m.put((*src, key), (*target, key), body[key])
    if src[-1] != "annotations" or src[:3] != target:
        m.note(Action.RENAMED, Level.NOTE, src, "→ login.service.annotations (merged)")


def _log_level(m: Migration, src: Path, value: Any, dst: Path) -> None:
    # zap's names and numbers, as the 7.x syncer took them
    levels = {"debug": "debug", "info": "info", "warn": "warning", "warning": "warning"}
    levels |= {"error": "error", "dpanic": "error", "panic": "error", "fatal": "error"}
    numbers = {-1: "debug", 0: "info", 1: "warning", 2: "error"}
    level = numbers.get(value) if isinstance(value, int) else levels.get(str(value).lower())
    if level is None:
        m.fail(src, f"{value!r} is not a zap log level", "debug, info, warn or error")
    elif level == value:
        m.put(src, dst, value)
    else:
        m.rename(src, dst, level)


def _reserved_memory(m: Migration, src: Path, value: Any, dst: Path) -> None:
    text = str(value)
    if not isinstance(value, bool) and text.isdigit() and int(text) > 0:
        # 7.x: DefMemPerCPU = (limits.memory_MB - reservedMemory_MB) / skuCpu
        m.rename(src, dst, f"{text}Mi", "7.x read a bare number as MiB; here it would be bytes")
    else:
        m.put(src, dst, value)


def _enroot_config(m: Migration, src: Path, value: Any, dst: Path) -> None:
    """enroot.conf keys that become plugin options must be one word: enroot sourced its file
    with a shell (`$(id -u)`), the plugin's plugstack.conf line does not."""
    body = m.mapping(src, value)
    for key in sorted(body or {}):
        item = body[key]
        if key in ENROOT_OPTIONS and (not isinstance(item, str) or len(item.split()) != 1):
            m.drop(
                (*src, key),
                f"{item!r} is not one word, as the plugin option {ENROOT_OPTIONS[key]} must be "
                "(no shell expands it here); the plugin's default is used",
                Level.WARNING,
            )
        else:
            m.put((*src, key), (*dst, key), item)


# --------------------------------------------------------------------------- the table

IMAGE = (
    "SUNK's images do not run under this operator (entrypoints, one Slurm version: "
    "images/README.md); the chart's opensunk image is used. Build site images FROM "
    "opensunk/slurmd (images/README.md, `Your own slurmd image`)"
)
OWN_POD = "it runs inside the operator and has no Pod of its own (see the sunk chart's operator)"
POD_KEYS = tuple(PodOptions.model_fields)


def _pod_options(prefix: str) -> dict[str, Decision]:
    return {f"{prefix}.{key}": CARRY for key in POD_KEYS}


def _no_pod(prefix: str) -> dict[str, Decision]:
    return {f"{prefix}.{key}": drop(OWN_POD) for key in POD_KEYS}


def _group_keys(prefix: str) -> dict[str, Decision]:
    from sunk.migrate import sections

    keys = ("enabled", "replicas", "skuCpu", "staticFeatures", "partitionConfig", "s6")
    keys += ("volumes", "volumeMounts", "podNamePrefix")
    return {
        **_pod_options(prefix),
        **{f"{prefix}.{key}": CARRY for key in keys},
        f"{prefix}.image": drop(IMAGE, Level.WARNING),
        f"{prefix}.gresGpu": handled(sections.gres_gpu, "empty text means none"),
        f"{prefix}.features": handled(sections.features, "a list is features.static"),
        f"{prefix}.definitions": handled(sections.definitions, "SUNK stock names checked"),
    }


@cache
def table() -> dict[str, Decision]:
    """The decisions, built on first use (the handlers' module imports this one)."""
    from sunk.migrate import sections

    decisions: dict[str, Decision] = {
        # -- chart-wide
        "nameOverride": CARRY,
        "fullnameOverride": CARRY,
        "clusterName": CARRY,
        "imagePullSecrets": CARRY,
        "global": SECTION,
        "global.*": drop("`global` is open for parent charts; nothing in this chart reads it"),
        "global.cks": drop("CoreWeave's registry switch; set global.imageRegistry for a mirror"),
        "global.imageRegistry": CARRY,
        "global.imagePullSecrets": CARRY,
        "global.affinity": CARRY,
        "global.volumes": CARRY,
        "global.volumeMounts": CARRY,
        "global.nodeSelector": SECTION,
        "global.nodeSelector.affinity": handled(_node_affinity, "control-plane affinity"),
        "global.nodeSelector.region": refuse(
            "CoreWeave's region selector for the control plane has no key here; pin it with "
            "global.affinity (topology.kubernetes.io/region) and remove this key"
        ),
        # -- slurmctld
        "controller": SECTION,
        **_pod_options("controller"),
        "controller.image": drop(IMAGE, Level.WARNING),
        "controller.replicas": handled(_single_controller, "one slurmctld"),
        "controller.stateVolume": SECTION,
        "controller.stateVolume.size": CARRY,
        "controller.stateVolume.storageClassName": CARRY,
        "controller.stateVolume.accessModes": CARRY,
        "controller.stateVolume.storageType": drop(
            "CoreWeave's storage type; name the StorageClass in stateVolume.storageClassName"
        ),
        "controller.livenessProbe": drop("the operator sets slurmctld's probes"),
        "controller.etcConfigMap": handled(
            _set_only(
                "the operator does not mount extra /etc/slurm files, so the ConfigMap's "
                "files would be lost",
                "put job_submit.lua / cli_filter.lua into slurmConfig.jobSubmitLua / "
                "cliFilterLua (configMap: {name, key}), other keys into slurmConfig; then "
                "remove this key",
            ),
            "refused when set",
        ),
        "controller.podDisruptionBudget": CARRY,
        "controller.ha": CARRY,
        "controller.keepStateOnDelete": CARRY,
        # -- slurmrestd
        "rest": SECTION,
        **_pod_options("rest"),
        "rest.enabled": CARRY,
        "rest.replicas": CARRY,
        "rest.image": drop(IMAGE, Level.WARNING),
        # -- slurmdbd and its database
        "accounting": SECTION,
        **_pod_options("accounting"),
        "accounting.enabled": CARRY,
        "accounting.replicas": CARRY,
        "accounting.image": drop(IMAGE, Level.WARNING),
        "accounting.database": CARRY,
        "accounting.config": handled(sections.dbd_config, "slurmdbd.conf passthrough"),
        "accounting.external": SECTION,
        "accounting.external.enabled": CARRY,
        "accounting.external.host": CARRY,
        "accounting.external.port": CARRY,
        "accounting.external.user": CARRY,
        "accounting.external.passwordSecret": CARRY,
        "accounting.external.*": refuse(
            "the external database's password is read only from accounting.external."
            "passwordSecret {name, key}; this key cannot be carried"
        ),
        "moco": handled(sections.moco, "MOCO: accounting.database.type moco"),
        "moco.mysqlCluster": SECTION,
        "moco.mysqlCluster.replicas": rename("accounting.database.moco.replicas"),
        "moco.mysqlCluster.resources": rename("accounting.database.moco.resources"),
        "moco.mysqlCluster.persistence": SECTION,
        "moco.mysqlCluster.persistence.size": rename("accounting.database.moco.storage.size"),
        "moco.mysqlCluster.persistence.storageClassName": rename(
            "accounting.database.moco.storage.storageClassName"
        ),
        "moco.mysqlCluster.persistence.storageType": drop(
            "CoreWeave's storage type; name the StorageClass in persistence.storageClassName"
        ),
        **{
            f"moco.mysqlCluster.{key}": drop(
                "this chart's MySQLCluster takes no placement; MOCO places it", Level.WARNING
            )
            for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName")
        },
        "mysql": handled(
            _off_or_refuse(
                "the Bitnami MySQL subchart holds the accounting database, and this chart "
                "cannot take it over: the data would be lost",
                "move the 7.x cluster to MOCO first (moco.enabled, moco.migration.enabled and "
                "mysql.enabled together, then migration and mysql off), as SUNK 8.0 requires",
                "the Bitnami MySQL subchart is off; this chart has none",
            ),
            "refused while enabled",
        ),
        # -- login
        "login": SECTION,
        **_pod_options("login"),
        "login.enabled": CARRY,
        "login.replicas": CARRY,
        "login.s6": CARRY,
        "login.volumes": CARRY,
        "login.volumeMounts": CARRY,
        "login.podDisruptionBudget": CARRY,
        "login.image": drop(IMAGE, Level.WARNING),
        "login.service": SECTION,
        "login.service.type": CARRY,
        "login.service.port": CARRY,
        "login.service.loadBalancerSourceRanges": CARRY,
        "login.service.externalTrafficPolicy": handled(_traffic_policy, "empty: the default"),
        "login.service.annotations": handled(_annotations, "merged"),
        "login.service.metadata": SECTION,
        "login.service.metadata.global": SECTION,
        "login.service.metadata.global.annotations": handled(_annotations, "merged"),
        "login.service.exposePublicIP": drop(
            "CoreWeave's public-IP switch; ask your load balancer through login.service.annotations"
        ),
        "login.service.additionalPorts": handled(
            _set_only(
                "the login Service has one port (ssh) here; extra ports cannot be carried",
                "expose them with a Service of your own in extraObjects",
            ),
            "refused when set",
        ),
        "login.sshKeyVolume": drop(
            "7.x kept the sshd host keys on this PVC; here the operator keeps them in a Secret "
            "(users see a new host key once), and login.sshKeyVolume means another thing",
            Level.WARNING,
        ),
        "login.loginController": drop("7.x's individual-login controller; not run here"),
        "login.directoryCache": drop("7.x's directory cache component; not run here"),
        "login.automountServiceAccountToken": drop("login Pods here mount no token"),
        "login.serviceAccountName": drop("login Pods here use the operator's account choice"),
        "login.containers": handled(
            _set_only(
                "extra sidecar containers cannot be carried: login Pods here take none",
                "run the work as an s6 longrun service (login.s6)",
            ),
            "refused when set",
        ),
        "slurm-login": handled(
            _off_or_refuse(
                "per-user login pods (the slurm-login subchart) have no counterpart: this "
                "chart runs shared login replicas",
                "set slurm-login.enabled: false to move users onto the login replicas",
                "the slurm-login subchart is off (SUNK 8.0 deletes it)",
            ),
            "refused while enabled",
        ),
        # -- compute
        "compute": SECTION,
        "compute.image": drop(IMAGE, Level.WARNING),
        "compute.reservedMemory": handled(_reserved_memory, "bare numbers were MiB"),
        "compute.maxUnavailable": CARRY,
        "compute.generateTopology": CARRY,
        "compute.dynamic": CARRY,
        "compute.s6": CARRY,
        "compute.mounts": CARRY,
        "compute.sharedMemory": CARRY,
        "compute.mpi": CARRY,
        "compute.updateStrategy": CARRY,
        "compute.nodeDefaults": CARRY,
        "compute.definitions": CARRY,
        "compute.securityContext": rename(
            "compute.nodeDefaults.securityContext", "under every group, as 7.x applied it"
        ),
        **{f"compute.{name}": SECTION for name in ("ssh", "autoPartition", "gpusd")},
        **{f"compute.{name}.enabled": CARRY for name in ("ssh", "autoPartition", "gpusd")},
        "compute.cacheDropper": SECTION,
        "compute.cacheDropper.enabled": CARRY,
        "compute.pyxis": SECTION,
        **{
            f"compute.pyxis.{key}": CARRY
            for key in (
                "enabled",
                "mountHome",
                "remapRoot",
                "appArmorProfile",
                "podSecurityContext",
                "plugstackOptions",
                "imageCacheSize",
                "insecureRegistries",
                "credentialsSecret",
                "cacheVolumeSizeLimit",
            )
        },
        "compute.pyxis.enrootConfig": handled(_enroot_config, "plugin options are words"),
        "compute.partitions": handled(sections.partitions, "raw lines parsed"),
        "compute.nodes": handled(sections.nodes, "groups and inline definitions"),
        **_group_keys("compute.nodes.*"),
        "autoPartition": handled(_switch_to_compute("autoPartition"), "compute.autoPartition"),
        "cacheDropper": handled(_switch_to_compute("cacheDropper"), "compute.cacheDropper"),
        "sunkDevicePlugin": drop(
            "the GPU device plugin is cluster-wide: the sunk chart's nvidia-device-plugin, or "
            "your provider's"
        ),
        "sunkScheduler": drop("a dead key in 7.x (no template read it)"),
        # -- the Pod Scheduler (inside the operator here)
        "scheduler": SECTION,
        **_no_pod("scheduler"),
        "scheduler.enabled": CARRY,
        "scheduler.name": CARRY,
        "scheduler.scope": CARRY,
        "scheduler.killWait": CARRY,
        "scheduler.image": drop(OWN_POD),
        "scheduler.logLevel": drop("the operator's log level covers the Pod Scheduler"),
        "scheduler.sentryDSN": drop("no error reporting service here"),
        "scheduler.config": SECTION,
        "scheduler.config.scheduler": CARRY,
        "scheduler.config.slurm": SECTION,
        "scheduler.config.slurm.poolSize": CARRY,
        "scheduler.config.slurm.usePersistentConnection": CARRY,
        "scheduler.config.slurm.protocolVersion": drop(
            "the Pod Scheduler here talks to slurmrestd, not Slurm's RPC protocol"
        ),
        # -- the Syncer (inside the operator here)
        "syncer": SECTION,
        **_no_pod("syncer"),
        "syncer.enabled": CARRY,
        "syncer.logLevel": handled(_log_level, "zap levels"),
        "syncer.removalGracePeriodSeconds": CARRY,
        "syncer.nodeLocking": CARRY,
        "syncer.image": drop(OWN_POD),
        "syncer.maxConcurrentReconciles": drop("the Syncer here has no such knob"),
        "syncer.sentryDSN": drop("no error reporting service here"),
        "syncer.nodePermissions": drop("the Syncer here does not restart Nodes"),
        "syncer.podMonitor": drop("scrape settings are the sunk chart's (operator.podMonitor)"),
        "syncer.vmPodScrape": drop("scrape settings are the sunk chart's (operator.vmPodScrape)"),
        "secretJob": drop(
            "the operator makes the munge and JWT keys itself; to keep the 7.x keys, set "
            "munge.existingSecret and jwt.existingSecret to their Secrets"
        ),
        "cleanupCompleting": drop("no cleanup-completing job runs here"),
        "network": drop("unused in 7.x too (`TODO NOT USED`)"),
        # -- users
        "nsscache": SECTION,
        **_pod_options("nsscache"),
        **{
            f"nsscache.{key}": CARRY
            for key in (
                "enabled",
                "existingSecret",
                "cronJobSchedule",
                "sudoGroups",
                "nsscacheConfig",
                "nsswitchConfig",
            )
        },
        "directoryService": handled(sections.directory_service, "old SSSD shape refused"),
        # -- keys and Slurm settings
        "munge": SECTION,
        "munge.resources": CARRY,
        "munge.existingSecret": CARRY,
        "munge.image": drop(IMAGE, Level.WARNING),
        "jwt": SECTION,
        "jwt.enabled": CARRY,
        "jwt.existingSecret": CARRY,
        "slurmConfig": handled(sections.slurm_config, "camelCase keys renamed"),
        # -- keys only this chart has (a file half migrated by hand)
        "topology": CARRY,
        "networkPolicy": CARRY,
        "prologScripts": CARRY,
        "epilogScripts": CARRY,
        "extraObjects": CARRY,
    }
    return decisions
