"""Stable content hashes for objects we compare instead of re-writing."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_hash(data: Any, length: int = 16) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]
