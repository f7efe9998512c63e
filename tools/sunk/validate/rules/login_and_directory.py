"""Login and directory rules: how the login (sshd) Service is exposed, and how the directory
service reads LDAP."""

from __future__ import annotations

from collections.abc import Iterator

from sunk.validate.rules.context import RuleContext, as_map, get
from sunk.validate.rules.registry import Hit, rule


@rule(
    "SUNK019",
    "external-traffic-policy-cluster-ip",
    "warning",
    "login.service.externalTrafficPolicy is set on a ClusterIP service (an API error).",
    "set login.service.externalTrafficPolicy: null, or use LoadBalancer/NodePort",
)
def traffic_policy(ctx: RuleContext) -> Iterator[Hit]:
    """Kubernetes accepts `externalTrafficPolicy` only on a Service that is reachable from outside
    (LoadBalancer or NodePort) and refuses it on a ClusterIP Service. The chart's own default
    (`Local`, for when the login Service is exposed) is not reported: only a value a values file
    sets next to `type: ClusterIP`.

    Fails:
        login:
          service: {type: ClusterIP, externalTrafficPolicy: Local}

    Passes:
        login:
          service: {type: ClusterIP, externalTrafficPolicy: null}
    """
    svc = as_map(get(ctx.values, "login", "service"))
    etp = ("login", "service", "externalTrafficPolicy")
    # The chart's default (Local) is for when the Service is exposed; only a value the user
    # wrote beside ClusterIP is a mistake.
    if svc.get("type") == "ClusterIP" and svc.get("externalTrafficPolicy") and ctx.set_by_user(etp):
        yield Hit(
            etp,
            f"externalTrafficPolicy {svc['externalTrafficPolicy']} on a ClusterIP service",
        )


@rule(
    "SUNK034",
    "login-load-balancer-open",
    "warning",
    "A LoadBalancer login Service without loadBalancerSourceRanges lets every address reach sshd.",
    "list the CIDRs your users come from in login.service.loadBalancerSourceRanges",
)
def login_load_balancer_open(ctx: RuleContext) -> Iterator[Hit]:
    """A LoadBalancer login Service puts sshd on an address the load balancer serves to anyone who
    can reach it; `login.service.loadBalancerSourceRanges` limits that to the networks listed.
    Without it every address can try to log in. A disabled login (`login.enabled: false`) is not
    reported.

    Fails:
        login:
          service: {type: LoadBalancer}

    Passes:
        login:
          service:
            type: LoadBalancer
            loadBalancerSourceRanges: [203.0.113.0/24]
    """
    svc = as_map(get(ctx.values, "login", "service"))
    login = as_map(ctx.values.get("login"))
    if login.get("enabled") is False or svc.get("type") != "LoadBalancer":
        return
    if not svc.get("loadBalancerSourceRanges"):
        yield Hit(
            ("login", "service", "type"),
            "the login LoadBalancer is open to every address (no loadBalancerSourceRanges)",
        )


@rule(
    "SUNK035",
    "directory-unencrypted",
    "warning",
    "directoryService reads LDAP over ldap:// without StartTLS: the bind password and every "
    "user's entry cross the network in clear text.",
    "use ldaps:// URIs, or set directoryService.startTls: true (with caSecret for a private CA)",
)
def directory_unencrypted(ctx: RuleContext) -> Iterator[Hit]:
    """With `directoryService.enabled`, an SSSD sidecar gives slurmctld, the login sshd and every
    slurmd their users and groups from LDAP.
    An `ldap://` URI without `directoryService.startTls: true` sends the bind password and every
    user's entry over the network in clear text; `ldaps://` or StartTLS encrypt them. Each plain
    `ldap://` URI is its own finding.

    Fails:
        directoryService:
          enabled: true
          ldapUri: [ldap://ldap.example.org]
          searchBase: dc=example,dc=org

    Passes:
        directoryService:
          enabled: true
          ldapUri: [ldaps://ldap.example.org]
          searchBase: dc=example,dc=org
    """
    directory = as_map(ctx.values.get("directoryService"))
    if directory.get("enabled") is not True or directory.get("startTls") is True:
        return
    uris = directory.get("ldapUri")
    for index, uri in enumerate(uris if isinstance(uris, list) else []):
        if isinstance(uri, str) and uri.startswith("ldap://"):
            yield Hit(
                ("directoryService", "ldapUri", index),
                f"{uri} without StartTLS: LDAP traffic is not encrypted",
            )
