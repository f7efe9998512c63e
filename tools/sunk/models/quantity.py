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
# Kubernetes stores a quantity in an int64: nothing larger is a real amount of memory or CPU.
MAX_QUANTITY = Decimal(2**63 - 1)
MAX_TEXT = 64  # characters of a quantity written as text


class QuantityError(ValueError):
    pass


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity as a plain number (bytes for memory, cores for CPU)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return _bounded(Decimal(str(value)), value)
    if len(str(value)) > MAX_TEXT:
        raise QuantityError(f"{str(value)[:20]!r}…: a quantity longer than {MAX_TEXT} characters")
    match = _RE.match(str(value).strip())
    if not match or match.group(3) not in _SUFFIX:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    number, exponent, suffix = match.groups()
    if exponent and (len(exponent) > 4 or abs(int(exponent[1:])) > 30):
        raise QuantityError(f"{value!r} is out of range (at most {MAX_QUANTITY})")
    try:
        result = Decimal(number) * _SUFFIX[suffix]
        if exponent:
            result *= Decimal(10) ** int(exponent[1:])
    except (InvalidOperation, ArithmeticError) as exc:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from exc
    return _bounded(result, value)


def _bounded(result: Decimal, value: object) -> Decimal:
    if not result.is_finite() or abs(result) > MAX_QUANTITY:
        raise QuantityError(
            f"{value!r} is out of range (at most {MAX_QUANTITY}, Kubernetes' int64)"
        )
    return result


def to_mebibytes(value: str | int | float) -> int:
    """Memory quantity in MiB, rounded down (Slurm's RealMemory unit)."""
    return int(parse_quantity(value) / _SUFFIX["Mi"])


def to_cpus(value: str | int | float) -> Decimal:
    return parse_quantity(value)
