{{/*
Validate one node group; fail with the values key path on input the cluster cannot run.
Usage: include "slurm.nodeset.validate" (dict "name" $name "group" $g)
*/}}
{{- define "slurm.nodeset.validate" -}}
{{- $name := .name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "compute.nodes.%s: group name must be a DNS label (lowercase letters, digits, '-')" $name) -}}
{{- end -}}
{{- if gt (len $name) 40 -}}
{{- fail (printf "compute.nodes.%s: group name is longer than 40 characters" $name) -}}
{{- end -}}
{{- end -}}
