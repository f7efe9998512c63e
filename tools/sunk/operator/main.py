"""`sunk-operator`: run the operator, or check an installation (the chart's helm test)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from datetime import UTC, datetime

import kopf
from aiohttp import web
from kopf._core.engines.peering import Identity  # kopf exports no public name for it

from sunk import __version__
from sunk.operator import runtime
from sunk.operator.check import run_check
from sunk.operator.client import Backoff, CredentialsError, Kube
from sunk.operator.leader import LeaderElector, identity
from sunk.operator.metrics import Metrics
from sunk.syncer.hook import Locker, hook_app


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log pipelines that parse fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sunk-operator", description="The open SUNK operator.")
    p.add_argument("--version", action="version", version=f"sunk-operator {__version__}")
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="reconcile SlurmClusters and NodeSets (default)")
    for target in (p, run):
        target.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster)")
        target.add_argument(
            "--log-level", default="info", choices=["debug", "info", "warning", "error"]
        )
        target.add_argument(
            "--log-format",
            default="text",
            choices=["text", "json"],
            help="json: one object per line (time, level, logger, message, exception)",
        )
        target.add_argument(
            "--metrics-port",
            type=int,
            default=8080,
            help="serves /metrics (and health, when on the same port)",
        )
        target.add_argument("--health-port", type=int, default=8081)
        target.add_argument(
            "--hook-port",
            type=int,
            default=8082,
            help="serves the lock hook that job prologs call (0: off)",
        )
        target.add_argument(
            "--hook-wait",
            type=float,
            default=120.0,
            help="seconds a lock waits for evicted Pods to go (then: pending, or a failed "
            "strict lock)",
        )
        target.add_argument(
            "--hook-url",
            default="",
            help="the lock hook's URL as slurmd Pods reach it (the chart's hook Service)",
        )
        target.add_argument("--health-host", default="0.0.0.0")
        target.add_argument("--leader-election-namespace", default="sunk")
        target.add_argument("--no-leader-election", action="store_true")
        target.add_argument(
            "--resync-seconds",
            type=_seconds,
            default=runtime.RESYNC_SECONDS,
            help="every object is reconciled again this often, changed or not "
            f"(default {runtime.RESYNC_SECONDS})",
        )
        target.add_argument(
            "--kube-api-qps",
            type=float,
            default=200.0,
            help="average Kubernetes API requests a second (client-side limit; 0: none); "
            "the API server's priority and fairness still applies",
        )
        target.add_argument(
            "--kube-api-burst",
            type=int,
            default=500,
            help="requests allowed at once above --kube-api-qps",
        )
        target.add_argument(
            "--namespace",
            action="append",
            default=[],
            help="watch only this namespace (repeatable; default all)",
        )
    check = sub.add_parser("check", help="check CRDs are Established and the operator ready")
    check.add_argument("--kubeconfig")
    check.add_argument("--crd", action="append", default=[])
    check.add_argument("--deployment", action="append", default=[], help="NAMESPACE/NAME")
    check.add_argument("--timeout", type=float, default=120)
    return p


async def serve(args: argparse.Namespace) -> None:
    metrics = Metrics()
    holder = identity()
    agent = f"sunk-operator/{__version__} ({holder})"
    kube = await Kube.connect(
        args.kubeconfig,
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
        observe=metrics.api_request,
        user_agent=agent,
    )
    rt = runtime.Runtime(
        kube=kube,
        metrics=metrics,
        namespaces=tuple(args.namespace),
        resync_seconds=args.resync_seconds,
        hook_url=args.hook_url if args.hook_port else "",
        operator_namespace=os.environ.get("POD_NAMESPACE") or None,
    )
    runner = web.AppRunner(runtime.health_app(rt))
    await runner.setup()
    for port in sorted({args.health_port, args.metrics_port}):
        await web.TCPSite(runner, args.health_host, port).start()
    # Every replica answers the hook (it is stateless: the Node holds the lock), so a job's
    # prolog does not wait for a leader election. Its writes are not the leader's: it has its
    # own connection, without the leader gate.
    hook_kube = await Kube.connect(args.kubeconfig, observe=metrics.api_request, user_agent=agent)
    locker = Locker(hook_kube, wait_seconds=args.hook_wait, namespaces=tuple(args.namespace))
    hook_runner = web.AppRunner(hook_app(locker))
    await hook_runner.setup()
    if args.hook_port:
        await web.TCPSite(hook_runner, args.health_host, args.hook_port).start()
    await runtime.wait_for_crds(kube)
    elector, keeping = None, None
    if not args.no_leader_election:
        # Its own connection, so renewals never queue behind reconcile traffic; no retries
        # beyond the renew deadline (LeaderElector bounds each renewal).
        elector = LeaderElector(
            await Kube.connect(args.kubeconfig, backoff=Backoff(attempts=2), user_agent=agent),
            args.leader_election_namespace,
            holder=holder,
        )
        await elector.acquire()
        keeping = asyncio.get_running_loop().create_task(elector.keep())
        rt.leading = elector.holding
        kube.may_write = elector.holding
    rt.metrics.lead()
    try:
        await kopf.operator(
            standalone=True,
            # kopf would ask getpass for a user name, which a non-root image uid lacks.
            identity=Identity(holder),
            # all namespaces by default (the chart's default); kopf needs an iterable either way
            clusterwide=not args.namespace,
            namespaces=list(args.namespace),
            memo=runtime.memo_for(rt),
        )
    finally:
        await rt.shutdown()
        if elector is not None and keeping is not None:
            # Stopped cleanly (SIGTERM): nothing reconciles any more, so the standby may take
            # over now rather than when the lease runs out.
            keeping.cancel()
            await elector.release()
            await elector.kube.close()
        await kube.close()
        await hook_kube.close()
        await runner.cleanup()
        await hook_runner.cleanup()


def run(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    handler = logging.StreamHandler()
    if getattr(args, "log_format", "text") == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=args.log_level.upper() if hasattr(args, "log_level") else "INFO",
        handlers=[handler],
    )
    # one line per probe request is noise; errors still show
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    try:
        if args.command == "check":
            sys.exit(asyncio.run(run_check(args)))
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args))
    except CredentialsError as exc:
        logging.getLogger("sunk.operator").error("no Kubernetes credentials: %s", exc)
        sys.exit(1)


if __name__ == "__main__":
    run()
