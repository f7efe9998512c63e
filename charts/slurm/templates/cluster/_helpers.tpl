{{/*
Validate compute.partitions (structured form) against the enabled node groups; fail with the
key path. Returns the partitions as JSON.
*/}}
{{- define "slurm.cluster.partitions" -}}
{{- $groups := include "slurm.enabledGroups" . | fromJsonArray -}}
{{- $partitions := .Values.compute.partitions | default list -}}
{{- $seen := dict -}}
{{- $defaults := list -}}
{{- range $i, $p := $partitions -}}
{{- $path := printf "compute.partitions[%d]" $i -}}
{{- if not $p.name -}}{{- fail (printf "%s.name: a partition needs a name" $path) -}}{{- end -}}
{{- if hasKey $seen $p.name -}}
{{- fail (printf "%s.name: partition %q is declared twice" $path $p.name) -}}
{{- end -}}
{{- if has $p.name $groups -}}
{{- fail (printf "%s.name: %q is already the partition of node group %q; rename it or use compute.nodes.%s.partitionConfig" $path $p.name $p.name $p.name) -}}
{{- end -}}
{{- $_ := set $seen $p.name true -}}
{{- if not $p.nodeSets -}}
{{- fail (printf "%s.nodeSets: partition %q has no node groups" $path $p.name) -}}
{{- end -}}
{{- range $j, $ns := $p.nodeSets -}}
{{- if and (ne $ns "ALL") (not (has $ns $groups)) -}}
{{- fail (printf "%s.nodeSets[%d]: partition %q names node group %q, which does not exist or is disabled (enabled groups: %s)" $path $j $p.name $ns (join ", " $groups)) -}}
{{- end -}}
{{- end -}}
{{- if $p.default -}}{{- $defaults = append $defaults $p.name -}}{{- end -}}
{{- end -}}
{{- if gt (len $defaults) 1 -}}
{{- fail (printf "compute.partitions: more than one default partition (%s)" (join ", " $defaults)) -}}
{{- end -}}
{{- toJson $partitions -}}
{{- end -}}
