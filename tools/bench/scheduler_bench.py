"""Benchmark: how long the Pod Scheduler takes to bind a burst of Pending Pods, against the
kube-scheduler binding the same Pods on the same Nodes in the same run, and their ratio.

    sudo .venv/bin/python tools/bench/scheduler_bench.py [--pods 200] [--nodes 4]

Everything is real: slurmctld, slurmrestd and ``--nodes`` slurmd daemons 24.11 in the ``slurm``
test tier's network namespaces (``SlurmdParameters=config_overrides`` lets each register 64
CPUs on this small machine; ``TaskPlugin=task/none``, so nothing pins those CPUs), and a real
kube-apiserver, kube-scheduler and kwok (``sunk.devenv.controlplane``) with one kwok Node per
slurmd, 64 CPUs each. The Pod Scheduler (``sunk.scheduler.loop.PodScheduler.run``) runs in this
process with its defaults; the benchmark wakes it once after creating the Pods, as the
operator's Pod handler would.

Round 1: ``--pods`` Pods of 1 CPU naming the Pod Scheduler are created at once; timed from the
first create until every one is bound (one placeholder job each: submit, start, prolog-less
start mark, bind). Round 2: the Pods are deleted (their jobs end), and the same number of Pods
for the default scheduler are created on the same Nodes; timed the same way. Printed: both
times, the time to half bound, the ratio, and the Slurm requests the Pod Scheduler made.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

from sunk.devenv.controlplane import ControlPlane
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.operator import names
from sunk.operator.client import Kube, path_for
from sunk.scheduler.loop import PodScheduler
from sunk.scheduler.podjob import Settings

NAMESPACE, CLUSTER, SCHEDULER = "bench", "bench", "bench-bench"
CPUS = 64
SLURM_CONF = """\
ClusterName=bench
SlurmctldHost={host}({addr})
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt.key
SlurmctldParameters=enable_configless
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MaxNodeCount=64
ReturnToService=2
KillWait=5
MinJobAge=300
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
NodeSet=b Feature=b
PartitionName=b Nodes=b Default=YES MaxTime=INFINITE State=UP
"""
NODE_CONF = f"Features=b CPUs={CPUS} RealMemory={CPUS * 1024}"


def pod(name: str, scheduler: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "a",
                "image": "bench",
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
            }
        ],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


async def burst(kube: Kube, count: int, prefix: str, scheduler: str | None) -> list[float]:
    """Create ``count`` Pods at once; seconds from the first create until each is bound."""
    pods_path = path_for("v1", "pods", NAMESPACE)
    started = time.monotonic()
    await asyncio.gather(*(kube.create(pod(f"{prefix}-{i:04d}", scheduler)) for i in range(count)))
    return await bound_times(kube, prefix, count, started, pods_path)


async def bound_times(
    kube: Kube, prefix: str, count: int, started: float, pods_path: str
) -> list[float]:
    seen: dict[str, float] = {}
    while len(seen) < count:
        now = time.monotonic() - started
        for item in await kube.list(pods_path):
            name = item["metadata"]["name"]
            if name.startswith(prefix) and item["spec"].get("nodeName") and name not in seen:
                seen[name] = now
        if now > 900:
            raise TimeoutError(f"{prefix}: {len(seen)}/{count} bound after 900 s")
        await asyncio.sleep(0.1)
    return sorted(seen.values())


async def clear(kube: Kube, restd_jobs: Any) -> None:
    """Delete every benchmark Pod, then wait until no placeholder holds a node."""
    for item in await kube.list(path_for("v1", "pods", NAMESPACE)):
        if item["metadata"]["name"].startswith(("ours-", "kube-")):
            await kube.delete(path_for("v1", "pods", NAMESPACE, item["metadata"]["name"]), 0)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        jobs = await restd_jobs()
        if not any({"RUNNING", "PENDING", "COMPLETING"} & set(j["job_state"]) for j in jobs):
            return
        await asyncio.sleep(1)
    raise TimeoutError("placeholder jobs still hold nodes 300 s after their Pods were deleted")


class Phases(logging.Handler):
    """When the Pod Scheduler logged each submission and each bind (its own log lines)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: dict[str, list[float]] = {"submitted": [], "bound": []}

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        kind = "submitted" if "submitted placeholder job" in text else None
        kind = "bound" if ": Bound to Node " in text else kind
        if kind:
            self.times[kind].append(time.monotonic())


def phases(phases_: Phases, jobs: list[dict[str, Any]], started: float, wall: float) -> dict:
    """Seconds from the first create to the first and last of each phase: submissions
    (the scheduler's log), job starts (Slurm's start_time, whole seconds), binds."""
    starts = sorted(
        float(j["start_time"]["number"] if isinstance(j["start_time"], dict) else j["start_time"])
        - wall
        for j in jobs
        if str(j.get("name", "")).startswith("pod") or "RUNNING" in j["job_state"]
    )
    out = {k: (v[0] - started, v[-1] - started) for k, v in phases_.times.items() if v}
    if starts:
        out["job started (Slurm)"] = (starts[0], starts[-1])
    return out


async def measure(cp: ControlPlane, url: str, args: argparse.Namespace) -> dict[str, Any]:
    kube = await Kube.connect(str(cp.kubeconfig))
    recorder = Phases()
    logging.getLogger(f"sunk.scheduler.{NAMESPACE}.{CLUSTER}").addHandler(recorder)
    sched = PodScheduler(
        kube, NAMESPACE, CLUSTER, SCHEDULER, url, names.jwt_secret(CLUSTER), Settings(),
        (NAMESPACE,),
    )  # fmt: skip
    task = asyncio.get_running_loop().create_task(sched.run())
    try:
        await asyncio.sleep(1)
        before = sched.restd.requests if sched.restd else 0
        first, wall = time.monotonic(), time.time()
        waiter = asyncio.get_running_loop().create_task(burst(kube, args.pods, "ours", SCHEDULER))
        await asyncio.sleep(0.05)
        sched.wake()
        ours = await waiter
        requests = (sched.restd.requests if sched.restd else 0) - before
        assert sched.restd is not None
        steps = phases(recorder, await sched.restd.jobs(), first, wall)
        await clear(kube, sched.restd.jobs)
        theirs = await burst(kube, args.pods, "kube", None)
        await clear(kube, sched.restd.jobs)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
    return {"ours": ours, "theirs": theirs, "requests": requests, "phases": steps}


def prepare(cp: ControlPlane, rt: SlurmRuntime, nodes: int) -> None:
    client = cp.client
    cp.create_namespace(NAMESPACE, {names.jwt_secret(CLUSTER): {"jwt.key": rt.jwt_key}})
    for i in range(nodes):
        name = f"b-{i}"
        cp.create_node(f"k8s-{i}", capacity={"cpu": CPUS, "memory": f"{CPUS}Gi", "pods": 250})
        client.create(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {
                "metadata": {
                    "name": name,
                    "labels": {names.LABEL_CLUSTER: CLUSTER, names.LABEL_NODESET: "b"},
                },
                "spec": {"nodeName": f"k8s-{i}", "containers": [{"name": "s", "image": "slurmd"}]},
            },
        )


def report(found: dict[str, Any], pods: int, nodes: int) -> None:
    ours, theirs = found["ours"], found["theirs"]
    print(f"\n{pods} Pending Pods of 1 CPU on {nodes} Nodes of {CPUS} CPUs")
    print(f"{'scheduler':<16}{'half bound':>12}{'all bound':>12}")
    print(f"{'Pod Scheduler':<16}{ours[len(ours) // 2]:>11.3f}s{ours[-1]:>11.3f}s")
    print(f"{'kube-scheduler':<16}{theirs[len(theirs) // 2]:>11.3f}s{theirs[-1]:>11.3f}s")
    print(f"ratio (Pod Scheduler / kube-scheduler, all bound): {ours[-1] / theirs[-1]:.1f}")
    print(f"Slurm requests by the Pod Scheduler during the burst: {found['requests']}")
    print("where the Pod Scheduler's time went (seconds from the first create, first .. last):")
    for phase, (a, b) in found["phases"].items():
        print(f"  {phase:<22}{a:>7.2f} .. {b:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    if args.pods > args.nodes * CPUS:
        parser.error(f"--pods must fit the nodes ({CPUS} CPUs each)")
    started = time.monotonic()
    with ControlPlane() as cp, SlurmRuntime() as rt:
        rt.start(
            {"slurm.conf": SLURM_CONF.format(host=rt.controller_host, addr=rt.controller_addr)}
        )
        url = rt.start_restd()
        names_ = [f"b-{i}" for i in range(args.nodes)]
        for name in names_:
            rt.add_node(name, NODE_CONF)
        rt.wait_nodes_idle(names_, timeout=180)
        prepare(cp, rt, args.nodes)
        print(f"control plane, slurmctld and {args.nodes} slurmd up in "
              f"{time.monotonic() - started:.0f}s", flush=True)  # fmt: skip
        found = asyncio.run(measure(cp, url, args))
    report(found, args.pods, args.nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
