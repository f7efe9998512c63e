"""The slurm chart's `healthCheck` in the SlurmCluster (`pytest -k health_check`)."""

from __future__ import annotations

from tests.chart.conftest import write_values


def health_of(objects, *files) -> dict:
    (cluster,) = [d for d in objects("slurm", *files) if d["kind"] == "SlurmCluster"]
    return cluster["spec"]["healthCheck"]


def test_health_check_empty_maps_are_left_out_so_removing_the_last_check_removes_the_field(
    objects, tmp_path
):
    """Server-side apply stores a map emptied by an upgrade as null, which the CRD refuses;
    left out, the field goes (the operator's defaults are the same empty maps)."""
    plain = health_of(objects)
    assert not {"active", "scripts", "diskFree"} & set(plain), plain
    assert plain["nodeConditions"] == [] and plain["interval"] == 0
    values = write_values(
        tmp_path,
        "healthCheck:\n  interval: 60\n  diskFree: {/scratch: 5%}\n"
        "  active:\n    ar: {every: 600, allreduce: {minBusBandwidth: 1Gi}}\n",
    )
    set_ = health_of(objects, values)
    assert set_["diskFree"] == {"/scratch": "5%"} and set(set_["active"]) == {"ar"}
    assert "scripts" not in set_
