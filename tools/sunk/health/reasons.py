"""Slurm drain reasons written by the health checks and by the Syncer, and what each may do to
the other's: pure, and standard library only (the slurmd image runs it without our package's
dependencies).

A node has one reason. Three writers share it:

- the Syncer: ``k8s: <cause>`` while its Pod or Node says the node must not take jobs;
- the health check runner: ``health: <check>: <detail>`` while a check fails;
- everyone else (an admin's ``scontrol``, Slurm's own ``Prolog error``): any other text.

A node failing a check while a ``k8s:`` cause holds carries both, the Syncer's first:
``k8s: <cause> | health: <check>: <detail>``. Each writer lifts only its own part: the drain
ends when neither is left. Other reasons are never touched, except that one carrying SUNK's
marker ``sunk:verify-undrain`` is lifted by the next run in which every check passes.

A ``k8s:`` cause whose values ask for verification (a Node condition with ``verify``) is not
lifted when it clears: the Syncer marks it ``<cause> (cleared; sunk:verify-undrain)``, and the
runner lifts it after its next run in which every check passes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

K8S_PREFIX = "k8s:"
HEALTH_PREFIX = "health:"
VERIFY_MARKER = "sunk:verify-undrain"
SEPARATOR = " | "
# Slurm keeps reasons whole, but they are shown in one sinfo column: a detail says what failed,
# not everything the check printed.
MAX_DETAIL = 200


@dataclass(frozen=True)
class Reason:
    """A reason split into its writers' parts (at most one of ``other`` and the two others)."""

    k8s: str | None = None  # "k8s: ..."
    health: str | None = None  # "health: <check>: <detail>"
    other: str | None = None  # anyone else's

    @property
    def check(self) -> str | None:
        """The check a health part names."""
        if self.health is None:
            return None
        return self.health[len(HEALTH_PREFIX) :].strip().split(":", 1)[0].strip() or None

    @property
    def verify(self) -> bool:
        """An admin asked for the node back once its checks pass."""
        return self.other is not None and VERIFY_MARKER in self.other

    @property
    def k8s_cleared(self) -> bool:
        """The Syncer's cause cleared and waits for a passing check (``cleared()``)."""
        return self.k8s is not None and self.k8s.endswith(CLEARED_SUFFIX)

    def text(self) -> str:
        if self.other is not None:
            return self.other
        return SEPARATOR.join(p for p in (self.k8s, self.health) if p)


def parse(reason: str | None) -> Reason:
    reason = (reason or "").strip()
    if reason.startswith(K8S_PREFIX):
        head, sep, tail = reason.partition(SEPARATOR + HEALTH_PREFIX)
        return Reason(k8s=head, health=HEALTH_PREFIX + tail if sep else None)
    if reason.startswith(HEALTH_PREFIX):
        return Reason(health=reason)
    return Reason(other=reason or None)


def one_line(detail: str, empty: str = "") -> str:
    """A detail for a reason: one line, cut to ``MAX_DETAIL``; a ``|`` in it would read as our
    separator, so it becomes ``/``."""
    flat = " ".join(detail.replace(SEPARATOR.strip(), "/").split()) or empty
    if len(flat) > MAX_DETAIL:
        flat = flat[: MAX_DETAIL - 3] + "..."
    return flat


def health_reason(check: str, detail: str) -> str:
    """``health: <check>: <detail>``."""
    return f"{HEALTH_PREFIX} {check}: {one_line(detail, 'failed')}"


CLEARED_SUFFIX = f" (cleared; {VERIFY_MARKER})"


def cleared(k8s: str) -> str:
    """The Syncer's part once its cause cleared, waiting for a passing check."""
    return k8s + CLEARED_SUFFIX


@dataclass(frozen=True)
class Result:
    ok: bool
    detail: str = ""
    seconds: float = field(default=0.0, compare=False)  # how long the check took


@dataclass(frozen=True)
class Decision:
    """``drain`` with a reason (on a drained node: only the reason changes), ``resume``, or
    nothing (``action`` None)."""

    action: str | None = None
    reason: str | None = None


NOTHING = Decision()


def decide(
    drained: bool,
    reason: str | None,
    results: Mapping[str, Result],
    configured: Collection[str],
) -> Decision:
    """What the runner does after a run: ``results`` of the checks that ran (a check may skip
    a run, e.g. an idle-node check on a busy node), ``configured`` every check's name.

    A health drain is lifted only when the check it names passed in this run, or is no longer
    configured and every check that ran passed."""
    failing = next(((n, r) for n, r in sorted(results.items()) if not r.ok), None)
    new_health = health_reason(failing[0], failing[1].detail) if failing else None
    if not drained:
        return Decision("drain", new_health) if new_health else NOTHING
    current = parse(reason)
    if current.other is not None:  # an admin's (or Slurm's): only a verify request is ours
        if current.verify and results and failing is None:
            return Decision("resume")
        return NOTHING
    if new_health is not None:
        if current.health is not None and not _passed(current.check, results, configured):
            return NOTHING  # its check still fails, or did not run: keep the first detail
        return Decision("drain", Reason(k8s=current.k8s, health=new_health).text())
    if current.health is None:  # the Syncer's alone: ours once its cause cleared
        return Decision("resume") if current.k8s_cleared and results else NOTHING
    if not _passed(current.check, results, configured):
        return NOTHING  # that check did not run (an active one, an idle one): not passed yet
    if current.k8s is not None and not current.k8s_cleared:
        return Decision("drain", current.k8s)  # the Syncer's part stays
    return Decision("resume")


def _passed(check: str | None, results: Mapping[str, Result], configured: Collection[str]) -> bool:
    """The check a health drain names passed in this run, or is no longer configured."""
    if check in results:
        return results[check].ok
    return check not in configured


def after_k8s(reason: str | None, cause: str | None, verify: Collection[str] = ()) -> Decision:
    """What the Syncer does to a drained node's reason: ``cause`` is its ``k8s:`` reason now
    (None: the cause cleared); ``verify``: causes (as ``_extends`` reads them) that the node
    only loses after a passing check. Only called for reasons that are the Syncer's or
    health's."""
    current = parse(reason)
    if cause is None:
        if current.k8s is None or current.k8s_cleared:
            return NOTHING  # nothing of ours, or the runner's to lift
        if current.health is not None:
            return Decision("drain", current.health)  # the check's part stays and verifies
        if any(_extends(current.k8s, v) for v in verify):
            return Decision("drain", cleared(current.k8s))
        return Decision("resume")
    if current.k8s is not None and not current.k8s_cleared and _extends(current.k8s, cause):
        return NOTHING
    return Decision("drain", Reason(k8s=cause, health=current.health).text())


def _extends(reason: str, cause: str) -> bool:
    """The reason is the cause, or says more about it (``<cause>: <detail>``): a slurmd whose
    s6 oneshot failed registers drained with ``k8s: Pod X not ready: s6 oneshot …``, and that
    detail stays while the Pod is not ready."""
    return reason == cause or reason.startswith(f"{cause}: ")
