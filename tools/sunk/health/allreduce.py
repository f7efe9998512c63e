"""One rank of the stock active check: time MPI allreduces and, on rank 0, print the bus
bandwidth as nccl-tests counts it (``2·(n−1)/n · size / time``). Started with ``srun`` by
``sunk.health.active``, one rank per node; needs mpi4py (the slurmd image has it).

Prints one line on rank 0: ``sunk-allreduce ranks=<n> size=<bytes> seconds=<mean> busbw=<B/s>``.
"""

from __future__ import annotations

import argparse
import array
import sys
import time


def bus_bandwidth(size: int, ranks: int, seconds: float) -> float:
    """Bytes per second each rank's link carries in a ring allreduce of ``size`` bytes."""
    if ranks < 2 or seconds <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * size / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sunk-allreduce")
    parser.add_argument("--size", type=int, required=True, help="bytes per allreduce")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args(argv)
    from mpi4py import MPI  # only here: the image has it, the operator does not

    comm = MPI.COMM_WORLD
    count = max(1, args.size // 4)
    send, recv = array.array("f", [1.0]) * count, array.array("f", [0.0]) * count
    comm.Allreduce(send, recv, op=MPI.SUM)  # warm-up: connections are made here
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(args.iterations):
        comm.Allreduce(send, recv, op=MPI.SUM)
    elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX) / args.iterations
    ranks = comm.Get_size()
    if recv[0] != float(ranks) or recv[-1] != float(ranks):
        print(f"sunk-allreduce: wrong sum {recv[0]} on rank {comm.Get_rank()}", file=sys.stderr)
        return 1
    if comm.Get_rank() == 0:
        busbw = bus_bandwidth(count * 4, ranks, elapsed)
        print(
            f"sunk-allreduce ranks={ranks} size={count * 4} seconds={elapsed:.6f} busbw={busbw:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
