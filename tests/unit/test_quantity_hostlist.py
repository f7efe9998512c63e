from decimal import Decimal

import pytest

from sunk.models.quantity import QuantityError, parse_quantity, to_mebibytes
from sunk.slurmconf.hostlist import compress


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4Gi", 4 * 2**30),
        ("500m", Decimal("0.5")),
        ("1.5G", 1_500_000_000),
        (8, 8),
        ("1e3", 1000),
        ("128Mi", 128 * 2**20),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["4GB", "abc", "", "-1Gi", True])
def test_bad_quantity(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_mebibytes_round_down():
    assert to_mebibytes("1Gi") == 1024
    assert to_mebibytes("1G") == 953


def test_hostlist_compress():
    names = ["h100-012-002", "h100-012-001", "h100-012-003", "h100-013-000", "login"]
    assert compress(names) == "login,h100-012-[001-003],h100-013-000"
    assert compress(["a-001", "a-003"]) == "a-[001,003]"
    assert compress([]) == ""
