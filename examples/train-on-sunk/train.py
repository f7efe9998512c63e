#!/usr/bin/env python3
"""Data-parallel training with numpy and MPI: the job of docs/tutorials/train-on-sunk.md.

Each rank makes its own shard of one synthetic regression problem from a fixed seed and its
rank (nothing is downloaded). Rank 0's initial weights are broadcast to every rank, and each
step averages the ranks' gradients with ``Allreduce``, so all ranks apply the same update to
the same weights. Rank 0 logs ``step=N loss=X`` and writes a checkpoint atomically (weights,
step and every rank's random state); a restarted job (``scontrol requeue``) resumes from it.

    srun --mpi=pmix python3 train.py --checkpoint "$HOME/train/ckpt.npz" --steps 200

The model is a two-layer perceptron (tanh) fitted by minibatch SGD to the output of a fixed
random "teacher" network plus noise; the loss is half the mean squared error over every
rank's shard. Only rank 0 reads and writes the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PARAMS = ("w1", "b1", "w2", "b2")
NOISE = 0.05


# --- the problem and the model (pure numpy) --------------------------------------------------


def make_shard(seed: int, rank: int, samples: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's ``samples`` examples: inputs from (seed, rank), targets from the teacher
    network every rank derives from the seed alone."""
    teacher = np.random.default_rng([seed, 0])
    a = teacher.normal(size=(features, 16)) / np.sqrt(features)
    b = teacher.normal(size=(16, 1))
    rng = np.random.default_rng([seed, 1, rank])
    x = rng.normal(size=(samples, features))
    y = np.tanh(x @ a) @ b + NOISE * rng.normal(size=(samples, 1))
    return x, y


def init_params(seed: int, features: int, hidden: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, 2])
    return {
        "w1": rng.normal(size=(features, hidden)) / np.sqrt(features),
        "b1": np.zeros(hidden),
        "w2": rng.normal(size=(hidden, 1)) / np.sqrt(hidden),
        "b2": np.zeros(1),
    }


def loss_and_grads(
    params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
) -> tuple[float, dict[str, np.ndarray]]:
    """Half the mean squared error over (x, y) and its gradient."""
    h = np.tanh(x @ params["w1"] + params["b1"])
    err = h @ params["w2"] + params["b2"] - y
    loss = 0.5 * float(np.mean(err**2))
    d = err / len(x)
    dh = (d @ params["w2"].T) * (1.0 - h**2)
    grads = {"w1": x.T @ dh, "b1": dh.sum(axis=0), "w2": h.T @ d, "b2": d.sum(axis=0)}
    return loss, grads


def sum_squared_error(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    h = np.tanh(x @ params["w1"] + params["b1"])
    return float(np.sum((h @ params["w2"] + params["b2"] - y) ** 2))


def flatten(arrays: dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([arrays[name].ravel() for name in PARAMS])


def unflatten(flat: np.ndarray, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out, offset = {}, 0
    for name in PARAMS:
        size = like[name].size
        out[name] = flat[offset : offset + size].reshape(like[name].shape)
        offset += size
    return out


def sgd_step(params, x, y, rng, batch_size, lr, average):
    """One data-parallel step: this rank's minibatch gradient, averaged over the ranks by
    ``average`` (flat vector in, flat mean out), applied to ``params`` in place."""
    index = rng.integers(0, len(x), size=batch_size)
    _, grads = loss_and_grads(params, x[index], y[index])
    mean = unflatten(average(flatten(grads)), params)
    for name in PARAMS:
        params[name] -= lr * mean[name]


# --- checkpoints ------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    params: dict[str, np.ndarray]
    step: int
    seed: int
    rng_states: list[str]  # one JSON bit-generator state per rank


def save_checkpoint(path: Path, ckpt: Checkpoint) -> None:
    """Write ``path`` atomically: a temporary file beside it, fsync, then rename over it, so a
    job killed mid-write leaves the previous checkpoint whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as fh:
            np.savez(
                fh,
                step=np.int64(ckpt.step),
                seed=np.int64(ckpt.seed),
                rng_states=np.array(ckpt.rng_states),
                **ckpt.params,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    dirfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


def load_checkpoint(path: Path) -> Checkpoint | None:
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        return Checkpoint(
            params={name: data[name].copy() for name in PARAMS},
            step=int(data["step"]),
            seed=int(data["seed"]),
            rng_states=[str(s) for s in data["rng_states"]],
        )


def rng_state(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state)


def restore_rng(state: str) -> np.random.Generator:
    rng = np.random.default_rng()
    rng.bit_generator.state = json.loads(state)
    return rng


# --- the job ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="train until this step (default 200)")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (.npz); resumed if present")
    p.add_argument("--log-every", type=int, default=10, help="log the loss every N steps")
    p.add_argument("--ckpt-every", type=int, default=20, help="checkpoint every N steps")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds to wait after each step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=64, help="examples per rank and step")
    p.add_argument("--samples-per-rank", type=int, default=4096)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--hidden", type=int, default=32)
    args = p.parse_args(argv)
    for name in ("steps", "log_every", "ckpt_every", "batch_size", "samples_per_rank"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def run(args: argparse.Namespace, mpi, out=sys.stdout) -> int:
    """The training job over ``mpi`` (mpi4py's ``MPI`` module, or a stand-in in tests)."""
    comm = mpi.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()

    def say(line: str) -> None:
        if rank == 0:
            print(line, file=out, flush=True)

    hosts = comm.gather(socket.gethostname(), root=0)
    say(f"world_size={size}")
    for r, host in enumerate(hosts or []):
        say(f"rank={r} host={host}")

    def average(flat: np.ndarray) -> np.ndarray:
        comm.Allreduce(mpi.IN_PLACE, flat, op=mpi.SUM)
        return flat / size

    x, y = make_shard(args.seed, rank, args.samples_per_rank, args.features)

    def global_loss(params) -> float:
        totals = np.array([sum_squared_error(params, x, y), float(len(x))])
        comm.Allreduce(mpi.IN_PLACE, totals, op=mpi.SUM)
        return 0.5 * totals[0] / totals[1]

    # Rank 0 alone reads the checkpoint (or makes the initial weights) and broadcasts them.
    start = None
    if rank == 0:
        ckpt = load_checkpoint(args.checkpoint) if args.checkpoint else None
        if ckpt is None:
            start = {"params": init_params(args.seed, args.features, args.hidden), "step": 0}
        else:
            start = {"params": ckpt.params, "step": ckpt.step, "rng_states": ckpt.rng_states}
            if ckpt.seed != args.seed:
                start = {"error": f"checkpoint seed {ckpt.seed} != --seed {args.seed}"}
            elif ckpt.params["w1"].shape != (args.features, args.hidden):
                start = {"error": f"checkpoint weights {ckpt.params['w1'].shape} do not fit "
                         f"--features {args.features} --hidden {args.hidden}"}  # fmt: skip
    start = comm.bcast(start, root=0)
    if "error" in start:
        if rank == 0:
            print(f"error: {args.checkpoint}: {start['error']}", file=sys.stderr, flush=True)
        return 2
    params, step = start["params"], start["step"]
    states = start.get("rng_states")
    if states and len(states) == size:
        rng = restore_rng(states[rank])
    else:
        if states:
            say(f"world size {len(states)} -> {size}: minibatch streams reseeded")
        rng = np.random.default_rng([args.seed, 3, rank, step])

    loss = global_loss(params)
    say(f"resumed from step={step} loss={loss:.6f}" if "rng_states" in start
        else f"step={step} loss={loss:.6f}")  # fmt: skip

    def checkpoint() -> None:
        all_states = comm.gather(rng_state(rng), root=0)
        if rank == 0 and args.checkpoint:
            save_checkpoint(args.checkpoint, Checkpoint(params, step, args.seed, all_states))

    saved = step
    while step < args.steps:
        sgd_step(params, x, y, rng, args.batch_size, args.lr, average)
        step += 1
        if step % args.log_every == 0:
            loss = global_loss(params)
            say(f"step={step} loss={loss:.6f}")
        if step % args.ckpt_every == 0:
            checkpoint()
            saved = step
        if args.sleep:
            time.sleep(args.sleep)
    if saved != step:
        checkpoint()
    say(f"done step={step} loss={global_loss(params):.6f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from mpi4py import MPI  # here, so the numpy parts above import without MPI
    except ImportError as exc:
        print(f"train.py needs mpi4py (Debian: python3-mpi4py): {exc}", file=sys.stderr)
        return 2
    return run(args, MPI)


if __name__ == "__main__":
    sys.exit(main())
