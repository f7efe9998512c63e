from __future__ import annotations

from tests.unit.validate.conftest import at


def test_unknown_key_with_suggestion(check):
    report = check("compute:\n  nodes:\n    gpu:\n      replica: 3\n")
    (finding,) = [f for f in report.findings if f.rule_id == "SCHEMA"]
    assert finding.location() == "values.yaml:4:7"
    assert finding.key_path == "compute.nodes.gpu.replica"
    assert "unknown key `replica` (did you mean `replicas`?)" in finding.message


def test_every_error_is_reported(check):
    report = check(
        "clusterName: Bad\nrest:\n  enabled: 'no'\n  replicas: -1\nlogin:\n  service:\n"
        "    type: Foo\n    prot: 22\n"
    )
    assert {("SCHEMA", n) for n in (1, 3, 4, 7, 8)} <= at(report)
    words = " ".join(f.message for f in report.findings)
    assert "jsonschema" not in words and "is not valid under any" not in words


def test_plain_words(check):
    report = check("compute:\n  nodes:\n    cpu:\n      replicas: '3'\n")
    assert any("must be a whole number or null, not text" in f.message for f in report.findings)


def test_errors_in_a_base_file_point_at_it(tmp_path, monkeypatch):
    from sunk.validate import Options, validate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text("login:\n  replicas: x\n")
    (tmp_path / "site.yaml").write_text("clusterName: ok\n")
    report = validate(Options(paths=["site.yaml"], values=["base.yaml"], render=False))
    assert [f.location() for f in report.findings] == ["base.yaml:2:3"]


def test_set_values_are_validated_too(check):
    report = check("clusterName: ok\n", sets=["compute.nodes.cpu.replicas=abc"])
    (finding,) = [f for f in report.findings if f.rule_id == "SCHEMA"]
    assert finding.file == "--set" and finding.key_path == "compute.nodes.cpu.replicas"


def test_null_deletes_a_default_like_helm(check):
    report = check("login:\n  service:\n    type: ClusterIP\n    externalTrafficPolicy: null\n")
    assert not report.findings
