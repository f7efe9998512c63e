"""The training example's image (examples/train-on-sunk, `opensunk/train`): four MPI ranks
under Debian's OpenMPI in one container with no network, a falling loss, a checkpoint, and a
second run that resumes from it. Runs where the Docker engine answers (SUNK_TEST_IMAGES=1
builds the image); otherwise it skips and says why."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from sunk.devenv import images


@pytest.fixture(scope="module")
def train_image() -> str:
    (spec,) = images.example_images()
    want = os.environ.get("SUNK_TEST_IMAGES") == "1"
    problem = images.engine_problem()
    if problem and not want:
        pytest.skip(f"{problem}; set SUNK_TEST_IMAGES=1 to build {spec.ref} and run this test")
    if want:
        try:
            images.build([spec.name])
        except images.ImageBuildError as exc:
            pytest.skip(f"{spec.ref} could not be built here: {exc}")
    if images.image_id(spec.ref) is None:
        pytest.skip(f"{spec.ref} not built: `python -m sunk.devenv.images build train`")
    return spec.ref


def mpirun(image: str, ckpt_dir: Path, *args: str) -> str:
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{ckpt_dir}:/ckpt", image,
         "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
         "python3", "/opt/train/train.py", "--checkpoint", "/ckpt/ckpt.npz", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_train_image_runs_four_ranks_and_resumes(train_image: str, tmp_path: Path):
    first = mpirun(train_image, tmp_path, "--steps", "30", "--log-every", "10")
    lines = first.splitlines()
    assert lines[0] == "world_size=4"
    assert [ln.split()[0] for ln in lines[1:5]] == [f"rank={r}" for r in range(4)]
    curve = [float(m) for m in re.findall(r"^step=\d+ loss=(\S+)$", first, re.M)]
    assert len(curve) == 4 and curve == sorted(curve, reverse=True), first
    assert lines[-1].startswith("done step=30 ")
    assert (tmp_path / "ckpt.npz").exists()
    second = mpirun(train_image, tmp_path, "--steps", "40", "--log-every", "10")
    assert "resumed from step=30 " in second
    assert "step=10 " not in second
    assert second.splitlines()[-1].startswith("done step=40 ")
