"""Kubernetes resource quantities, parsed exactly (Decimal), for memory and CPU arithmetic."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_RE = re.compile(r"^([+]?(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+))([eE][-+]?[0-9]+)?([a-zA-Z]*)$")


class QuantityError(ValueError):
    pass


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity as a plain number (bytes for memory, cores for CPU)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _RE.match(str(value).strip())
    if not match or match.group(3) not in _SUFFIX:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    number, exponent, suffix = match.groups()
    try:
        result = Decimal(number) * _SUFFIX[suffix]
        if exponent:
            result *= Decimal(10) ** int(exponent[1:])
    except InvalidOperation as exc:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from exc
    return result


def to_mebibytes(value: str | int | float) -> int:
    """Memory quantity in MiB, rounded down (Slurm's RealMemory unit)."""
    return int(parse_quantity(value) / _SUFFIX["Mi"])


def to_cpus(value: str | int | float) -> Decimal:
    return parse_quantity(value)
