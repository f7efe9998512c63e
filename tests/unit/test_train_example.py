"""examples/train-on-sunk: train.py's numpy parts and its job loop over a one-rank stand-in for
MPI (mpi4py is imported in main() only), and the tutorial's commands
(docs/tutorials/train-on-sunk.md) against the example's files."""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "train-on-sunk"
TUTORIAL = REPO / "docs" / "tutorials" / "train-on-sunk.md"


def _load_train():
    spec = importlib.util.spec_from_file_location("train_on_sunk", EXAMPLE / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


train = _load_train()


class OneRank:
    """mpi4py's COMM_WORLD for a single process: what every collective returns there."""

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def gather(self, obj, root=0):
        return [obj]

    def bcast(self, obj, root=0):
        return obj

    def Allreduce(self, sendbuf, recvbuf, op=None):
        assert sendbuf is MPI.IN_PLACE and op is MPI.SUM
        assert isinstance(recvbuf, np.ndarray)


MPI = SimpleNamespace(COMM_WORLD=OneRank(), IN_PLACE=object(), SUM=object())


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = train.run(train.parse_args(list(argv)), MPI, out=out)
    return rc, out.getvalue()


def losses(output: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step=(\d+) loss=(\S+)$", output, re.M)}


def test_loss_falls_over_50_steps():
    x, y = train.make_shard(0, 0, 2048, 8)
    params = train.init_params(0, 8, 32)
    rng = np.random.default_rng(1)
    before, _ = train.loss_and_grads(params, x, y)
    curve = []
    for _ in range(50):
        train.sgd_step(params, x, y, rng, 64, 0.1, lambda flat: flat)
        curve.append(train.loss_and_grads(params, x, y)[0])
    assert curve[-1] < 0.1 * before
    assert all(b < a for a, b in zip(curve[::10], curve[9::10], strict=True)), curve


def test_the_job_logs_a_falling_loss_and_ends_with_done(tmp_path: Path):
    rc, out = run("--steps", "50", "--log-every", "10", "--checkpoint", str(tmp_path / "c.npz"))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "world_size=1"
    assert re.fullmatch(r"rank=0 host=\S+", lines[1])
    curve = losses(out)
    assert list(curve) == [0, 10, 20, 30, 40, 50]
    assert all(b < a for a, b in zip(curve.values(), list(curve.values())[1:], strict=False))
    assert lines[-1] == f"done step=50 loss={curve[50]:.6f}"
    assert "resumed" not in out


def test_gradients_are_right_and_average_over_shards():
    """Backprop against finite differences; and the mean of two equal shards' gradients is the
    gradient over both (what Allreduce / world size computes)."""
    x, y = train.make_shard(3, 0, 40, 5)
    params = train.init_params(3, 5, 7)
    _, grads = train.loss_and_grads(params, x, y)
    eps = 1e-6
    for name in train.PARAMS:
        for index in [(0,) * params[name].ndim, tuple(s - 1 for s in params[name].shape)]:
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][index] += eps
            minus[name][index] -= eps
            numeric = (train.loss_and_grads(plus, x, y)[0]
                       - train.loss_and_grads(minus, x, y)[0]) / (2 * eps)  # fmt: skip
            assert grads[name][index] == pytest.approx(numeric, rel=1e-4, abs=1e-8)
    x1, y1 = train.make_shard(3, 1, 40, 5)
    _, g0 = train.loss_and_grads(params, x, y)
    _, g1 = train.loss_and_grads(params, x1, y1)
    _, both = train.loss_and_grads(params, np.vstack([x, x1]), np.vstack([y, y1]))
    mean = (train.flatten(g0) + train.flatten(g1)) / 2
    np.testing.assert_allclose(mean, train.flatten(both), rtol=1e-12, atol=1e-15)


def test_shards_are_reproducible_and_differ_by_rank():
    a0, b0 = train.make_shard(0, 0, 16, 4)
    a0_again, b0_again = train.make_shard(0, 0, 16, 4)
    a1, _ = train.make_shard(0, 1, 16, 4)
    np.testing.assert_array_equal(a0, a0_again)
    np.testing.assert_array_equal(b0, b0_again)
    assert not np.allclose(a0, a1)


def test_a_resumed_job_continues_at_the_saved_step_as_if_never_stopped(tmp_path: Path):
    ckpt = tmp_path / "train" / "ckpt.npz"
    rc, first = run("--steps", "20", "--ckpt-every", "10", "--checkpoint", str(ckpt))
    assert rc == 0 and ckpt.exists()
    saved = train.load_checkpoint(ckpt)
    assert saved is not None and saved.step == 20 and len(saved.rng_states) == 1
    rc, second = run("--steps", "50", "--ckpt-every", "10", "--checkpoint", str(ckpt))
    assert rc == 0
    assert f"resumed from step=20 loss={losses(first)[20]:.6f}" in second.splitlines()
    assert min(losses(second)) == 30  # no step before the checkpoint's is run again
    resumed = train.load_checkpoint(ckpt)
    # the same 50 steps without a stop: the same weights, bit for bit (RNG state restored)
    straight = tmp_path / "straight.npz"
    rc, whole = run("--steps", "50", "--ckpt-every", "10", "--checkpoint", str(straight))
    uninterrupted = train.load_checkpoint(straight)
    assert resumed is not None and uninterrupted is not None
    assert resumed.step == uninterrupted.step == 50
    for name in train.PARAMS:
        np.testing.assert_array_equal(resumed.params[name], uninterrupted.params[name])
    assert second.splitlines()[-1] == whole.splitlines()[-1]
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["ckpt.npz"]  # no temporary left


def test_a_finished_job_resumes_at_its_last_step_and_ends(tmp_path: Path):
    ckpt = tmp_path / "ckpt.npz"
    run("--steps", "15", "--ckpt-every", "10", "--checkpoint", str(ckpt))
    saved = train.load_checkpoint(ckpt)
    assert saved is not None and saved.step == 15  # the last step is saved too
    rc, out = run("--steps", "15", "--checkpoint", str(ckpt))
    assert rc == 0
    assert out.splitlines()[-2].startswith("resumed from step=15 ")
    assert out.splitlines()[-1].startswith("done step=15 ")


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch):
    ckpt = tmp_path / "ckpt.npz"
    run("--steps", "10", "--ckpt-every", "10", "--checkpoint", str(ckpt))
    before = ckpt.read_bytes()

    def broken(fh, **arrays):
        fh.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(train.np, "savez", broken)
    saved = train.load_checkpoint(ckpt)
    assert saved is not None
    with pytest.raises(OSError, match="disk full"):
        train.save_checkpoint(ckpt, saved)
    assert ckpt.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]


def test_a_checkpoint_of_another_model_is_refused(tmp_path: Path, capsys):
    ckpt = tmp_path / "ckpt.npz"
    run("--steps", "10", "--checkpoint", str(ckpt))
    rc, out = run("--steps", "20", "--hidden", "16", "--checkpoint", str(ckpt))
    assert rc == 2
    assert "do not fit --features 8 --hidden 16" in capsys.readouterr().err
    assert "done" not in out


def test_main_without_mpi4py_says_what_is_missing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as if not installed
    assert train.main(["--steps", "1"]) == 2
    assert "needs mpi4py (Debian: python3-mpi4py)" in capsys.readouterr().err


# --- the tutorial -----------------------------------------------------------------------------


def tutorial_blocks() -> list[str]:
    text = TUTORIAL.read_text()
    return re.findall(r"^```bash tutorial\n(.*?)^```$", text, re.M | re.S)


def test_the_tutorial_writes_the_example_job_script():
    blocks = tutorial_blocks()
    heredoc = re.search(r"<<'EOF'\n(.*?)^EOF$", blocks[0], re.M | re.S)
    assert heredoc is not None
    assert heredoc[1] == (EXAMPLE / "job.sbatch").read_text()


def test_the_tutorial_commands_use_only_the_two_placeholders():
    blocks = tutorial_blocks()
    assert len(blocks) == 5
    names = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", "".join(blocks)))
    # $REGISTRY and $TAG are substituted by the reader (or a test); $HOME is the shell's, jobid
    # the tutorial's own variable
    assert names == {"REGISTRY", "TAG", "HOME", "jobid"}
    script = "\n".join(blocks).replace("$REGISTRY", "10.250.0.1:5443").replace("$TAG", "v1")
    proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert '--container-image="10.250.0.1:5443#train:v1"' in script


def test_the_example_image_is_a_development_image():
    from sunk.devenv import images

    (spec,) = images.example_images()
    assert spec.ref == f"{images.IMAGE_PREFIX}/train:{images.DEV_IMAGE_TAG}"
    cmd = images.build_command(spec, REPO)
    assert cmd[cmd.index("-f") + 1] == str(EXAMPLE / "Dockerfile")
    assert cmd[-1] == str(EXAMPLE)
    assert f"BASE_IMAGE={images.BASE_IMAGE}" in cmd
    dockerfile = (EXAMPLE / "Dockerfile").read_text()
    assert "COPY train.py /opt/train/train.py" in dockerfile
    for package in ("python3", "python3-numpy", "python3-mpi4py", "openmpi-bin"):
        assert re.search(rf"\s{re.escape(package)}(\s|$)", dockerfile), package
