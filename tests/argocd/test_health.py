"""The argocd-cm Lua health checks, run by a real Lua 5.1 interpreter (lupa) — the dialect of
Argo CD's gopher-lua — against fixture objects in Argo CD's own ``health_test.yaml`` format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.argocd import healthchecks as health

pytestmark = pytest.mark.unit

lua51 = pytest.importorskip("lupa.lua51", reason="lupa missing: pip install -e '.[dev]'")

HERE = Path(__file__).parent / "health"
CHECKS = {check.key: check for check in health.HEALTH_CHECKS}
# Libraries Argo CD opens without useOpenLibs: base, table, package and a "safe" os.
CLOSED_LIBS = ("string", "io", "math", "debug", "coroutine", "os")


def _to_lua(runtime: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return runtime.table_from({k: _to_lua(runtime, v) for k, v in value.items()})
    if isinstance(value, list):
        return runtime.table_from([_to_lua(runtime, v) for v in value])
    return value


def run_check(key: str, obj: dict[str, Any]) -> dict[str, Any]:
    check = CHECKS[key]
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    g = runtime.globals()
    if not check.needs_open_libs:
        for lib in CLOSED_LIBS:
            g[lib] = None
    g.obj = _to_lua(runtime, obj)
    result = runtime.execute(check.script)
    return {"status": result["status"], "message": result["message"]}


def _cases() -> list[Any]:
    cases = []
    for test_file in sorted(HERE.glob("*/*/health_test.yaml")):
        group, kind = test_file.parent.parent.name, test_file.parent.name
        key = f"{group}_{kind}"
        for case in yaml.safe_load(test_file.read_text())["tests"]:
            input_path = test_file.parent / case["inputPath"]
            cases.append(
                pytest.param(key, input_path, case["healthStatus"], id=f"{kind}-{input_path.stem}")
            )
    return cases


@pytest.mark.parametrize(("key", "input_path", "expected"), _cases())
def test_health_fixture(key: str, input_path: Path, expected: dict[str, str]) -> None:
    obj = yaml.safe_load(input_path.read_text())
    assert run_check(key, obj) == expected


def test_every_check_has_fixtures_for_each_status() -> None:
    statuses: dict[str, set[str]] = {}
    for key, input_path, expected in (c.values for c in _cases()):
        statuses.setdefault(key, set()).add(expected["status"])
        assert input_path.is_file()
    assert set(statuses) == set(CHECKS)
    for key, seen in statuses.items():
        assert {"Healthy", "Progressing", "Degraded"} <= seen, key
    # every check handles an object without status
    stems = {p.stem for p in HERE.glob("*/*/testdata/missing-status.yaml")}
    assert stems == {"missing-status"}
    assert len(list(HERE.glob("*/*/testdata/missing-status.yaml"))) == len(CHECKS)


def test_application_check_needs_no_open_libs() -> None:
    assert "string." not in health.load_script(health.APPLICATION_KEY)
    assert not CHECKS[health.APPLICATION_KEY].needs_open_libs


@pytest.mark.parametrize("key", sorted(CHECKS))
def test_checks_survive_odd_objects(key: str) -> None:
    # Empty object, empty status, conditions without reason: a status, never a Lua error.
    for obj in (
        {},
        {"status": {}},
        {"metadata": {}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    ):
        result = run_check(key, obj)
        assert result["status"] in {"Healthy", "Progressing", "Degraded", "Suspended"}
        assert isinstance(result["message"], str)
