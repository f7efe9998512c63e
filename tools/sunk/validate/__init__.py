"""`sunkctl validate`: the CI gate for values files in a GitOps repository.

Steps, in order, into one report (see `engine.validate`):

1. YAML parsing with positions, duplicate and non-string keys (`yamlload`)
2. Helm's coalescing (`coalesce`) + the chart's values.schema.json, every error (`schema_step`)
3. Semantic rules over node groups, partitions and Slurm settings (`rules`)
4. Rendering with the real helm + the Slurm config renderer (`render_step`)
5. Validation of every rendered object against Kubernetes / our CRD schemas (`k8s_step`)

The library never prints: reporters turn a `Report` into text, JSON, JUnit, SARIF or GitHub
workflow annotations.
"""

from sunk.validate.engine import Options, validate
from sunk.validate.findings import Finding, Report, Severity

__all__ = ["Finding", "Options", "Report", "Severity", "validate"]
