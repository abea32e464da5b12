#!/bin/bash
# Campaigns of ssmcheck against third-party GDN kernels (vLLM's and flash-linear-attention's), on a
# GPU machine with torch and triton. The kernels are not in this repository: put them in peers/
# (git-ignored; docs/plugins.md, "Third-party kernels") or install the packages.
#
#   scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|all] [SECONDS]
#
# Per adapter: a few fixed op scripts (check), then fuzz campaigns per h mode and gating, each
# bounded by --cases and SECONDS (exploratory: how many cases run depends on the machine; every
# summary line names its cases and seed). Logs and shrunk cases go to OUTDIR.
set -u
exe=${1:?usage: scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|all] [SECONDS]}
out=${2:?usage: scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|all] [SECONDS]}
which=${3:-all}
secs=${4:-120}
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export SSMCHECK_VLLM_PATH=${SSMCHECK_VLLM_PATH:-$root/peers/vllm} SSMCHECK_FLA_PATH=${SSMCHECK_FLA_PATH:-$root/peers/fla}
mkdir -p "$out"

campaign() {  # adapter-module backend-name label args...
  local mod=$1 name=$2 label=$3
  shift 3
  python3 -m ssmcheck.adapters.$mod "$exe" "$@" --backend "python:$name" > "$out/$label.txt" 2>&1
  echo "$label rc=$?: $(grep -E 'cases \(case|passed|FAILED|error' "$out/$label.txt" | head -3 | tr '\n' ' ')"
}

run_adapter() {  # module name
  local mod=$1 name=$2
  for mode in f32 f16-pool; do
    campaign $mod $name "$name-check-$mode" check --preset odd-a --h-mode $mode --seed 3 \
      --ops 'alloc; prefill 5; decode; verify 3; commit 2 3; decode; verify 4; commit 1 4; checkpoint; verify 2; rollback 0; decode; snapshot_save 0; prefill 2; snapshot_restore 0; decode'
  done
  local i=0
  for mode in f32 f16-pool; do
    for gating in default contract; do
      local opt=""
      [[ $gating == contract ]] && opt=",gating=contract"
      campaign $mod "$name$opt" "$name-fuzz-$mode-$gating" fuzz --h-mode $mode --seed $((11 + i)) --cases 100000 \
        --duration "$secs" --max-ops 40 --out "$out/$name-fuzz-$mode-$gating"
      i=$((i + 1))
    done
  done
  campaign $mod "$name,gating=contract" "$name-fuzz-qwen3-next-80b-f32" fuzz --preset qwen3-next-80b --layers 2 --h-mode f32 \
    --seed 21 --cases 100000 --duration "$secs" --max-ops 30 --out "$out/$name-fuzz-qwen3-next-80b-f32"
}

[[ $which == vllm || $which == all ]] && run_adapter vllm_gdn vllm-gdn
[[ $which == fla || $which == all ]] && run_adapter fla_gdn fla-gdn
exit 0
