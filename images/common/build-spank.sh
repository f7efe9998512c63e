#!/usr/bin/env bash
# Image build step: compile our SPANK plugin (spank_sunk_container.so, `srun --container-image`)
# against the image's own Slurm headers, so it loads in that Slurm's srun and slurmstepd.
#   build-spank.sh SOURCE.c OUTPUT.so
# Build arguments (as environment): SLURM_VERSION and SLURM_SUITE, as for install-slurm.sh.
set -euo pipefail
source=${1:?source}
output=${2:?output}
/usr/local/lib/sunk/install-slurm.sh gcc libc6-dev libslurm-dev
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-format-truncation -fPIC -shared \
  -o "$output" "$source"
