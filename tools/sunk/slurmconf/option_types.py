"""The value types of slurm.conf options, as Slurm 24.11's parser reads them: what `sunkctl
validate` checks in `slurmConfig` and in partition `config` before slurmctld sees the file.

The renderer quotes a value with a space, so nothing is injected, but slurmctld refuses the
whole file at its next start or reconfigure when one value does not parse (every Slurm command
does too, as each reads slurm.conf). Each option here is typed as Slurm's own parser reads it
(``src/common/read_config.c``, ``parse_config.c``); the slurm tier checks every type against
that parser (``tests/slurm/test_option_types.py``). Options not listed are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

UINT16 = 65535
UINT32 = 4294967295
UINT64 = 18446744073709551615
_UNLIMITED = {"unlimited", "infinite"}
_BOOLEANS = {"yes", "no", "true", "false", "up", "down", "1", "0"}
_TIME = re.compile(r"^(?:\d+-(?:\d+(?::\d+(?::\d+)?)?)?|\d+(?::\d+(?::\d+)?)?)$")


@dataclass(frozen=True)
class OptionType:
    """A name for messages (``time``, ``count up to 65535``…) and a check that returns the
    problem with a value, or None."""

    name: str
    check: Callable[[str], str | None]
    # values Slurm takes and refuses: the slurm tier feeds each to Slurm's own parser
    good: tuple[str, ...] = ()
    bad: tuple[str, ...] = ()


def _count(limit: int, *, minimum: int = 0, unlimited: bool = False, name: str = "") -> OptionType:
    def check(text: str) -> str | None:
        if unlimited and text.lower() in _UNLIMITED:
            return None
        if not text.isdigit():
            return "is not a whole number" + (" or UNLIMITED" if unlimited else "")
        if int(text) > limit:
            return f"is greater than {limit}"
        if int(text) < minimum:
            return f"is less than {minimum}"
        return None

    name = name or f"a whole number from {minimum} to {limit}"
    name += " or UNLIMITED" if unlimited else ""
    good = (str(minimum), str(limit), *(("UNLIMITED", "infinite") if unlimited else ()))
    # past 64 bits Slurm's own check is C's strtoull, which we do not mirror
    bad = ("abc", "-1", "1.5", "4G", *((str(limit + 1),) if limit < UINT64 else ()),
           *((str(minimum - 1),) if minimum else ()))  # fmt: skip
    return OptionType(name, check, good, bad)


def _time(text: str) -> str | None:
    """Slurm's time_str2mins: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
    days-hours:minutes, days-hours:minutes:seconds, UNLIMITED/INFINITE or -1."""
    if text.lower() in _UNLIMITED or text == "-1" or _TIME.match(text):
        return None
    return "is not a time"


def _boolean(text: str) -> str | None:
    return None if text.lower() in _BOOLEANS else "is not YES or NO"


def _one_of(*choices: str) -> OptionType:
    def check(text: str) -> str | None:
        if text.lower() in {c.lower() for c in choices}:
            return None
        return "is not a choice Slurm knows"

    return OptionType(f"one of {', '.join(choices)}", check, choices, ("bogus",))


def _list_of(*choices: str) -> OptionType:
    def check(text: str) -> str | None:
        known = {c.lower() for c in choices}
        bad = [item for item in text.split(",") if item.strip().lower() not in known]
        if bad:
            return f"has `{bad[0]}`, not a choice Slurm knows"
        return None

    good = (*choices, ",".join(choices[:2]))
    return OptionType(
        f"a list of {', '.join(choices)}", check, good, ("bogus", f"{choices[0]},bogus")
    )


def _oversubscribe(text: str) -> str | None:
    mode, _, count = text.partition(":")
    if mode.lower() in {"exclusive", "no"} and not count:
        return None
    if mode.lower() in {"yes", "force"} and (not count or count.isdigit()):
        return None
    return "is not a choice Slurm knows"


TIME = OptionType(
    "a time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED)", _time,
    ("90", "10:00", "1:02:03", "2-3", "1-02:03", "1-02:03:04", "UNLIMITED", "infinite", "-1"),
    ("1.5", "abc", "1:2:3:4", "10m"),
)  # fmt: skip
BOOLEAN = OptionType("YES or NO", _boolean, ("YES", "no", "true", "0"), ("maybe", "on", "y"))
COUNT16 = _count(UINT16)
COUNT32 = _count(UINT32)
COUNT64 = _count(UINT64)
MEGABYTES = _count(UINT64, name="megabytes, a whole number without a unit")
MEGABYTES_OR_UNLIMITED = _count(UINT64, unlimited=True, name="megabytes without a unit")
DEBUG_LEVEL = _one_of(
    "quiet", "fatal", "error", "info", "verbose",
    "debug", "debug2", "debug3", "debug4", "debug5",
)  # fmt: skip
# Which modes combine depends on PreemptType (slurmctld checks the pair): the examples are the
# ones that hold with the default preempt/none.
PREEMPT_MODE = replace(
    _list_of("OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN"), good=("OFF", "GANG")
)

# slurm.conf's own keys (lower case → type)
_SECONDS16 = [
    "messagetimeout",
    "tcptimeout",
    "slurmctldtimeout",
    "slurmdtimeout",
    "inactivelimit",
    "killwait",
    "maxtaskspernode",
    "healthcheckinterval",
    "returntoservice",
    "unkillablesteptimeout",
    "batchstarttimeout",
    "waittime",
    "resumetimeout",
    "getenvtimeout",
    "prologepilogtimeout",
    "jobrequeue",
    "completewait",
]
_COUNTS32 = [
    "minjobage",
    "epilogmsgtime",
    "priorityweightage",
    "priorityweightfairshare",
    "priorityweightjobsize",
    "priorityweightpartition",
    "priorityweightqos",
]
SLURM_CONF: dict[str, OptionType] = {
    **dict.fromkeys(_SECONDS16, COUNT16),
    "schedulertimeslice": _count(UINT16, minimum=5),
    "treewidth": _count(UINT16, minimum=1),
    "overtimelimit": _count(UINT16, unlimited=True),
    **dict.fromkeys(_COUNTS32, COUNT32),
    "maxjobcount": _count(UINT32, minimum=1),
    "maxstepcount": _count(UINT32, minimum=1),
    "maxnodecount": _count(65536),
    "defmempercpu": MEGABYTES,
    "defmempernode": MEGABYTES_OR_UNLIMITED,
    "maxmempercpu": MEGABYTES_OR_UNLIMITED,
    "maxmempernode": MEGABYTES_OR_UNLIMITED,
    "prioritymaxage": TIME,
    "prioritydecayhalflife": TIME,
    "preemptexempttime": TIME,
    "slurmctlddebug": DEBUG_LEVEL,
    "slurmddebug": DEBUG_LEVEL,
    "preemptmode": PREEMPT_MODE,
    "prologflags": _list_of(
        *[
            "Alloc",
            "Contain",
            "DeferBatch",
            "ForceRequeueOnFail",
            "NoHold",
            "RunInJob",
            "Serial",
            "X11",
        ]
    ),
    "healthchecknodestate": _list_of(
        *["ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE"]
    ),
    "enforcepartlimits": _one_of("ALL", "ANY", "NO", "YES"),
    "accountingstorageenforce": _list_of(
        *["all", "associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys"]
    ),
}

# keys of a PartitionName line (lower case → type)
_PARTITION_BOOLEANS = [
    "default",
    "disablerootjobs",
    "exclusiveuser",
    "exclusivetopo",
    "hidden",
    "lln",
    "powerdownonidle",
    "reqresv",
    "rootonly",
]
PARTITION: dict[str, OptionType] = {
    **dict.fromkeys(_PARTITION_BOOLEANS, BOOLEAN),
    "defaulttime": TIME,
    "maxtime": TIME,
    "gracetime": COUNT32,
    "maxnodes": _count(UINT32, unlimited=True),
    "minnodes": COUNT32,
    "maxcpuspernode": _count(UINT32, unlimited=True),
    "maxcpuspersocket": _count(UINT32, unlimited=True),
    "defcpupergpu": COUNT64,
    "defmempercpu": MEGABYTES,
    "defmempergpu": MEGABYTES,
    "defmempernode": MEGABYTES_OR_UNLIMITED,
    "maxmempercpu": MEGABYTES_OR_UNLIMITED,
    "maxmempernode": MEGABYTES_OR_UNLIMITED,
    "prioritytier": COUNT16,
    "priorityjobfactor": COUNT16,
    "resumetimeout": COUNT16,
    "oversubscribe": OptionType(
        "EXCLUSIVE, NO, YES[:count] or FORCE[:count]",
        _oversubscribe,
        ("EXCLUSIVE", "NO", "YES", "YES:4", "FORCE", "force:2"),
        ("sometimes", "NO:4"),
    ),
    "state": _one_of("UP", "DOWN", "DRAIN", "INACTIVE"),
    "cpubind": _one_of("none", "socket", "ldom", "core", "thread"),
}


def value_problem(table: dict[str, OptionType], key: str, text: str) -> str | None:
    """Why Slurm would not take ``text`` for ``key`` (of ``table``), or None (also for a key
    the table does not type)."""
    option = table.get(key.lower())
    if option is None:
        return None
    problem = option.check(text.strip())
    return f"`{key}={text}` {problem}: Slurm reads {key} as {option.name}" if problem else None
