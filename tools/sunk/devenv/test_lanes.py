"""`make test` as two pytest runs side by side.

The ``e2e`` and ``faults`` tiers share one real-node cluster and spend most of their hour
waiting: on jobs that sleep, on kubelet's probes, on faults held for minutes. Every other
tier is short and mostly busy. Run one after the other they passed CI's 90 minutes; side by
side the run takes about as long as the real-node lane alone.

The lanes cannot collide: each real-node cluster, Slurm runtime and user-mode Linux machine
lives in network namespaces, cgroups and directories named by its own run id, and pytest keeps
a locked temporary directory per run. What both lanes build, the container images, is built
once before they start, so no two ``docker build`` of one image race. The other lane runs
at a lower CPU priority: the real-node lane's faults are the ones with deadlines.

    python -m sunk.devenv.test_lanes [PYTEST ARGS ...]

Both lanes get the same pytest arguments. The real-node lane prints as it goes; the other's
output is kept in a file and printed whole when it ends. The exit status is the worst lane's
(a lane that selects no test is not a failure; both selecting none is). With
``SUNK_TEST_IMAGES=0`` nothing is built beforehand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sunk.devenv import images

REAL_NODE_TIERS = "e2e or faults"
# niceness of the lane without deadlines that depend on the CPU
OTHERS_NICENESS = 5
NO_TESTS_COLLECTED = 5


@dataclass
class Lane:
    name: str
    marker: str
    niceness: int = 0
    log: Path | None = None  # None: the lane prints to our stdout
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0
    _out: IO[bytes] | None = field(default=None, repr=False)

    def start(self, args: list[str]) -> None:
        argv = [sys.executable, "-m", "pytest", "-m", self.marker, *args]
        if self.niceness:  # nice execs pytest: the pid, and so the signals, stay pytest's
            argv = ["nice", "-n", str(self.niceness), *argv]
        self._out = self.log.open("wb") if self.log else None
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdout=self._out,
            stderr=subprocess.STDOUT if self._out else None,
        )

    def poll(self) -> int | None:
        assert self.proc is not None
        code = self.proc.poll()
        if code is not None and not self.ended:
            self.ended = time.monotonic()
            if self._out:
                self._out.close()
        return code

    @property
    def minutes(self) -> float:
        return ((self.ended or time.monotonic()) - self.started) / 60


def lanes(log_dir: Path) -> list[Lane]:
    return [
        Lane("real nodes", REAL_NODE_TIERS),
        Lane("others", f"not ({REAL_NODE_TIERS})", OTHERS_NICENESS, log_dir / "others.log"),
    ]


def prepare_images() -> None:
    """Build (or find cached) the images both lanes use, so that neither builds one while the
    other does. A failure is reported and left to the tiers, which skip or fail saying why."""
    if os.environ.get("SUNK_TEST_IMAGES") == "0":
        return
    specs = images.images() + images.dev_images() + images.example_images()
    try:
        images.build_specs(specs)
    except (images.ImageBuildError, OSError, subprocess.SubprocessError) as exc:
        print(f"test lanes: images not prepared ({exc}); the tiers build them", flush=True)


def say(text: str) -> None:
    print(f"\n{'=' * 20} {text} {'=' * 20}", flush=True)


def wait(running: list[Lane]) -> dict[str, int]:
    """Each lane's exit status; a lane with a log has it printed as soon as it ends."""
    codes: dict[str, int] = {}
    while len(codes) < len(running):
        for lane in running:
            if lane.name in codes or (code := lane.poll()) is None:
                continue
            codes[lane.name] = code
            if lane.log:
                say(f"lane {lane.name} ended ({code}) after {lane.minutes:.1f} min: its output")
                sys.stdout.write(lane.log.read_text(errors="replace"))
                sys.stdout.flush()
        time.sleep(0.2)
    return codes


def run(args: list[str], log_dir: Path) -> int:
    prepare_images()
    running = lanes(log_dir)
    for lane in running:
        lane.start(args)
        where = f"output in {lane.log}, printed when it ends" if lane.log else "output below"
        say(f"lane {lane.name}: pytest -m '{lane.marker}' ({where})")

    def forward(signum: int, _frame: object) -> None:
        for lane in running:
            if lane.proc and lane.proc.poll() is None:
                lane.proc.send_signal(signum)

    handlers = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        codes = wait(running)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    say("lanes")
    worst = 0
    for lane in running:
        code = codes[lane.name]
        state = {0: "passed", NO_TESTS_COLLECTED: "no test selected"}.get(code, f"failed ({code})")
        print(f"{lane.name:12} {lane.minutes:6.1f} min  {state}")
        if code not in (0, NO_TESTS_COLLECTED):
            worst = max(worst, code)
    if all(code == NO_TESTS_COLLECTED for code in codes.values()):
        return NO_TESTS_COLLECTED
    return worst


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="sunk-lanes-") as tmp:
        return run(args, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
