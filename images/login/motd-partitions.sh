#!/bin/sh
# Part of the message of the day (pam_motd runs it at each login): the cluster's partitions as
# slurmctld reports them now, with their state, nodes and time limit.
command -v sinfo >/dev/null || exit 0
out=$(timeout 5 sinfo --noheader --format '%P %a %D %l' 2>/dev/null) || exit 0
[ -n "$out" ] || exit 0
printf '\nPartitions (name, state, nodes, time limit; * = default):\n'
printf '%s\n' "$out" | while read -r name state nodes limit; do
  printf '  %-20s %-6s %5s nodes  %s\n' "$name" "$state" "$nodes" "$limit"
done
