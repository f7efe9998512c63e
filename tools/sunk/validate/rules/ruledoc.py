"""A rule's documentation is its function's docstring, in one shape:

    One paragraph: what the rule finds, why it matters, how it decides.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc], nodeSelector: {pool: cpu}}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}

Each example is a values file (YAML, indented under its heading) for the rule's first chart,
laid over that chart's defaults as `sunkctl validate` lays a file. The failing example should
make this rule fire and nothing else; where that cannot be (a rule that only fires together
with another), the heading names the others: `Fails (also SUNK001):`. `--list-rules` prints
all three parts; tests/unit/validate/test_rule_examples.py runs both examples through validate.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass

HEADINGS = {"Fails:": "fails", "Passes:": "passes"}
_HEADING = re.compile(r"^(Fails|Passes)(?: \(also ([A-Z0-9]+(?:, [A-Z0-9]+)*)\))?:$")


@dataclass(frozen=True)
class RuleDoc:
    explanation: str  # one paragraph, on one line
    fails: str | None  # YAML text, dedented; None when the docstring has no such section
    passes: str | None
    also: tuple[str, ...] = ()  # the other rules the failing example fires (`Fails (also …):`)
    problems: tuple[str, ...] = ()  # how the docstring departs from the shape above

    @property
    def fails_heading(self) -> str:
        return f"Fails (also {', '.join(self.also)}):" if self.also else "Fails:"


def parse(doc: str | None) -> RuleDoc:
    """The docstring's three parts; a malformed docstring is described, not raised."""
    intro: list[str] = []
    sections: dict[str, list[str]] = {}
    problems: list[str] = []
    also: tuple[str, ...] = ()
    current = intro
    for line in inspect.cleandoc(doc or "").splitlines():
        heading = _HEADING.match(line.strip())
        if heading:
            if line != line.strip():
                problems.append(f"`{line.strip()}` is indented (a heading starts its line)")
            key = HEADINGS[f"{heading.group(1)}:"]
            if heading.group(2) and key == "fails":
                also = tuple(heading.group(2).split(", "))
            elif heading.group(2):
                problems.append(f"`{line.strip()}`: only a failing example fires other rules")
            if key in sections:
                problems.append(f"`{line.strip()}` appears twice")
            current = sections.setdefault(key, [])
        elif current is not intro and line.strip() and not line.startswith(" "):
            problems.append(f"`{line}` follows an example without being indented under it")
            current.append(line)
        else:
            current.append(line)
    paragraphs = [p for p in "\n".join(intro).split("\n\n") if p.strip()]
    if len(paragraphs) != 1:
        problems.append(f"the explanation is {len(paragraphs)} paragraphs, not one")
    examples = {
        key: textwrap.dedent("\n".join(lines)).strip("\n") for key, lines in sections.items()
    }
    for heading, key in HEADINGS.items():
        if not examples.get(key):
            problems.append(f"no `{heading}` example")
    return RuleDoc(
        " ".join(" ".join(intro).split()),
        examples.get("fails") or None,
        examples.get("passes") or None,
        also,
        tuple(problems),
    )
