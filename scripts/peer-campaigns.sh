#!/bin/bash
# Campaigns of ssmcheck against third-party kernels (vLLM's and flash-linear-attention's GDN
# kernels, vLLM's Mamba-2 selective_state_update), on a GPU machine with torch and triton. The kernels are not in this repository: put them in peers/
# (git-ignored; docs/plugins.md, "Third-party kernels") or install the packages.
#
#   scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|vllm-mamba2|all] [SECONDS]
#
# Per adapter: a fixed op script (check) per h mode; fuzz campaigns on drawn small odd models per
# h mode and on qwen3-next-80b (2 layers), each bounded by --cases and SECONDS (exploratory: how
# many cases run depends on the machine; every summary line names its cases and seed); then the
# three numerics conventions the adapters declare (--gates torch, --f16-store inf, --f16-rows
# carried), each forced back to the contract's on the case that found it (expected to diverge:
# they show what the convention is). vllm-mamba2: a fixed op script per h mode, campaigns on each
# Mamba-2 preset with the contract's dt computed in torch (dt=contract), then the kernel's own dt
# and its exp on the cases that found them (expected to diverge: docs/plugins.md, "What the
# campaigns found"). Logs and shrunk cases go to OUTDIR.
set -u
exe=${1:?usage: scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|vllm-mamba2|all] [SECONDS]}
out=${2:?usage: scripts/peer-campaigns.sh SSMCHECK OUTDIR [vllm|fla|vllm-mamba2|all] [SECONDS]}
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
  echo "$label rc=$?: $(grep -E 'cases \(case|: agree|DIFFERENT|error' "$out/$label.txt" | head -2 | cut -c1-200 | tr '\n' ' ')"
}

run_adapter() {  # module name
  local mod=$1 name=$2
  for mode in f32 f16-pool; do
    campaign $mod $name "$name-check-$mode" check --preset odd-a --h-mode $mode --seed 3 \
      --ops 'alloc; prefill 5; decode; verify 3; commit 2 3; decode; verify 4; commit 1 4; checkpoint; verify 2; rollback 0; decode; snapshot_save 0; prefill 2; snapshot_restore 0; decode'
  done
  campaign $mod $name "$name-fuzz-f32" fuzz --h-mode f32 --seed 11 --cases 100000 --duration "$secs" --max-ops 40 \
    --out "$out/$name-fuzz-f32"
  campaign $mod $name "$name-fuzz-f16-pool" fuzz --h-mode f16-pool --seed 13 --cases 100000 --duration "$secs" \
    --max-ops 40 --out "$out/$name-fuzz-f16-pool"
  for mode in f32 f16-pool; do
    campaign $mod $name "$name-fuzz-qwen3-next-80b-$mode" fuzz --preset qwen3-next-80b --layers 2 --h-mode $mode \
      --seed 21 --cases 100000 --duration "$((secs / 2))" --max-ops 30 --out "$out/$name-fuzz-qwen3-next-80b-$mode"
  done
  # the conventions, forced back to the contract's (expected rc 1)
  campaign $mod $name "$name-convention-gates" check --preset odd-d --h-mode f32 --slots 1 --capacity 0 \
    --conv-capacity 0 --seed 0 --decay 0 --value-scale 30 --extreme-gates --ops 'alloc; prefill 2' --gates clamped
  campaign $mod $name "$name-convention-f16-store" check --preset odd-d --h-mode f16-pool --slots 1 --capacity 0 \
    --conv-capacity 0 --seed 0 --decay 0.1 --value-scale 200000 --ops 'alloc; decode' --f16-store saturate
  campaign $mod $name "$name-convention-f16-rows" check --preset odd-d --h-mode f16-pool --slots 1 --capacity 0 \
    --conv-capacity 0 --snapshots 2 --seed 0 --decay 0.1 --value-scale 200000 --ops 'alloc; decode @pad,0' --f16-rows stored
}

run_mamba2() {
  local name=vllm-mamba2
  for mode in f32 f16-pool; do
    campaign vllm_mamba2 $name "$name-check-$mode" check --preset mamba-odd-b --h-mode $mode --seed 3 \
      --ops 'alloc; prefill 5; decode; verify 3; commit 2 3; decode; verify 4; commit 1 4; checkpoint; verify 2; rollback 0; decode; snapshot_save 0; prefill 2; snapshot_restore 0; decode'
  done
  for preset in mamba-tiny mamba-odd-a mamba-odd-b mamba-odd-c mamba-wide; do
    campaign vllm_mamba2 $name,dt=contract "$name-fuzz-$preset-f32" fuzz --preset $preset --h-mode f32 --seed 11 \
      --cases 100000 --duration "$((secs / 4))" --max-ops 40 --out "$out/$name-fuzz-$preset-f32"
  done
  campaign vllm_mamba2 $name,dt=contract "$name-fuzz-nemotron-h-8b-f32" fuzz --preset nemotron-h-8b --layers 2 \
    --h-mode f32 --seed 21 --cases 100000 --duration "$((secs / 4))" --max-ops 30 --out "$out/$name-fuzz-nemotron-h-8b-f32"
  campaign vllm_mamba2 $name,dt=contract "$name-fuzz-mamba-odd-b-f16-pool" fuzz --preset mamba-odd-b --h-mode f16-pool \
    --seed 12 --cases 100000 --duration "$((secs / 4))" --max-ops 40 --out "$out/$name-fuzz-mamba-odd-b-f16-pool"
  # what the kernel does that the contract does not (expected rc 1): its softplus in FP32, no dt
  # limits, and dA flushed to 0 (0 * inf = NaN on an overflowed FP16 state, where the contract's
  # floor of 2^-149 keeps inf)
  campaign vllm_mamba2 $name "$name-kernel-softplus" check --preset mamba-odd-b --h-mode f32 --slots 3 --capacity 1,0,0 \
    --conv-capacity 0 --seed 188505490 --decay 0.9 --value-scale 30 --extreme-gates --ops 'alloc; verify 1'
  campaign vllm_mamba2 $name "$name-kernel-dt-limits" check --preset mamba-odd-a --h-mode f32 --slots 1 --capacity 0 \
    --conv-capacity 0 --seed 0 --decay 0.5 --value-scale 1 --ops 'alloc; decode @pad,0'
  campaign vllm_mamba2 $name,dt=contract "$name-kernel-exp-floor" check --preset mamba-odd-b --h-mode f16-pool --slots 2 \
    --capacity 1,0 --conv-capacity 0 --seed 45 --decay 0.1 --value-scale 60000 --extreme-gates \
    --ops 'alloc; decode; prefill 1; decode @pad,pad,0'
}

[[ $which == vllm || $which == all ]] && run_adapter vllm_gdn vllm-gdn
[[ $which == fla || $which == all ]] && run_adapter fla_gdn fla-gdn
[[ $which == vllm-mamba2 || $which == all ]] && run_mamba2
exit 0
