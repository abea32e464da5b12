#!/usr/bin/env bash
# Regenerates the golden traces under fixtures/traces/ with `ssmcheck record`, then the faulty
# traces derived from them (scripts/make_faulty_traces.py). BACKEND=cuda records the states
# from the CUDA implementation (on a GPU machine); the default is the CPU reference.
# Variables: BACKEND (reference|cuda), SSMCHECK (the binary; default build/ssmcheck), OUT.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${SSMCHECK:-$root/build/ssmcheck}
out=${OUT:-$root/fixtures/traces}
backend=${BACKEND:-reference}
mkdir -p "$out/faulty"
rec() {  # rec NAME DESCRIPTION [flags...]
  local name=$1 desc=$2
  shift 2
  "$bin" record --backend "$backend" --producer "scripts/record_golden.sh" --description "$desc" \
    -o "$out/$name.h5" "$@"
}

# Every op in each h mode (both verify arms, async copies, snapshots, release/re-alloc), with the
# refusals the contract demands recorded in place.
rec tiny_f32_every_op "every op, h f32, both verify arms, two refusals" --outputs \
  --preset tiny --h-mode f32 --seed 11 \
  --ops "alloc; prefill 7; checkpoint; verify 4; commit 2 4; decode; checkpoint_async; verify 3 wy; rollback 1;
         decode; rollback 0; snapshot_save 0; decode; snapshot_restore 0; verify 4; rollback_and_checkpoint_async 2;
         decode; to_f16; commit 0 4; release; alloc; prefill 2"
rec odd_a_f16_every_op "every op, h f16 (to_f16 on the first decode, continuation prefill), conv bias" --outputs \
  --preset odd-a --h-mode f16 --seed 12 --value-scale 30 \
  --ops "alloc; prefill 5; to_f16; decode; checkpoint; verify 4; commit 3 4; to_f16; checkpoint_async; verify 3 wy;
         rollback 2; prefill 3; decode; snapshot_save 1; decode; snapshot_restore 1; verify 2;
         rollback_and_checkpoint_async 1; release"
rec odd_b_f16pool_every_op "every op, h f16-pool (staging blob), sigmoid gate, d_conv 2" --outputs \
  --preset odd-b --h-mode f16-pool --seed 13 --decay 0.1 \
  --ops "alloc; prefill 6; checkpoint; verify 3; commit 2 3; decode; checkpoint_async; verify 4 wy; rollback 3;
         snapshot_save 0; prefill 2; snapshot_restore 0; rollback_and_checkpoint_async 0; decode; to_f16; release"
# Batched decode/verify with padding rows, tiered intermediate capacities, mixed layer shapes.
rec odd_d_f32_batched "batched decode/verify with padding, both arms, tiered capacities, mixed layer shapes; states of layers 0 and 1" \
  --outputs --state-layers 0,1 --preset odd-d --h-mode f32 --seed 14 --slots 4 --capacity 4,2,3,4 \
  --ops "alloc @0; alloc 3 @1; alloc @2; prefill 3 @0; prefill 4 @1; prefill 2 @2; decode @0,pad,1,2;
         verify 3 @1,0,pad; commit 2 3 @1; commit 3 3 @0; verify 3 wy @2,pad,0; rollback 2 @2; commit 1 3 @0;
         decode @2,1; release @1; decode @pad,0"
rec tiny_f16pool_batched "batched ops in f16-pool mode with padding" --outputs \
  --preset tiny --h-mode f16-pool --seed 15 --slots 3 \
  --ops "alloc @0; alloc @1; prefill 4 @0; prefill 3 @1; checkpoint @0; decode @1,pad,0; verify 4 @0,1;
         commit 2 4 @0; rollback 3 @1; verify 3 wy @pad,1,0; rollback 0 @0; decode @0,1"
# Refusals of every contract check that a script can reach, each recorded where it happened.
rec tiny_f32_refusals "contract refusals recorded in place" \
  --preset tiny --h-mode f32 --seed 16 --slots 2 --capacity 2 --snapshots 1 \
  --ops "alloc; prefill 2; verify 9; verify 3; commit 1 4; commit 0 3; commit 4 3; rollback 3; snapshot_restore 0;
         to_f16; alloc @1; alloc @2; decode @0,0; decode @5; prefill 0; commit 2 3; release"
# The real model's shapes, two layers; states of layer 1 only, after two ops (keeps the file small).
rec qwen3_next_80b_f16 "qwen3-next-80b, first two GDN layers, h f16; states of layer 1 after the last decode" \
  --outputs --preset qwen3-next-80b --layers 2 --h-mode f16 --seed 17 --slots 2 --capacity 2 --conv-capacity 2 \
  --states 6 --state-layers 1 \
  --ops "alloc; prefill 5; decode; checkpoint; verify 3; commit 2 3; decode"
# Mamba-2 layers: every op in f16 (to_f16) and f16-pool (staging), norm before the gate, a layer
# without conv bias, ng = nh; a model mixing GDN and Mamba-2 layers, batched with padding.
rec mamba_tiny_f16_every_op "Mamba-2: every op, h f16 (to_f16 on the first decode), both verify arms" --outputs \
  --preset mamba-tiny --h-mode f16 --seed 21 --value-scale 30 \
  --ops "alloc; prefill 5; decode; checkpoint; verify 4; commit 3 4; checkpoint_async; verify 3 wy; rollback 2;
         prefill 3; decode; snapshot_save 1; decode; snapshot_restore 1; verify 2; rollback_and_checkpoint_async 1;
         to_f16; release"
rec mamba_odd_b_f16pool_every_op "Mamba-2: every op, h f16-pool, norm before the gate, no conv bias, ng = nh" --outputs \
  --preset mamba-odd-b --h-mode f16-pool --seed 22 --decay 0.1 \
  --ops "alloc; prefill 6; checkpoint; verify 3; commit 2 3; decode; checkpoint_async; verify 4 wy; rollback 3;
         snapshot_save 0; prefill 2; snapshot_restore 0; rollback_and_checkpoint_async 0; decode; release"
rec hybrid_odd_f32_batched "GDN and Mamba-2 layers alternating: batched decode/verify with padding, tiered capacities, dt limits on" \
  --outputs --preset hybrid-odd --h-mode f32 --seed 23 --slots 3 --capacity 4,3,2 --extreme-gates \
  --ops "alloc 3 @0; alloc 3 @1; prefill 4 @0; prefill 3 @1; checkpoint @0; decode @1,pad,0; verify 4 @0,1;
         commit 2 4 @0; rollback 2 @1; verify 3 wy @pad,1,0; rollback 0 @0; decode @0,1"
# The PLE carry (STATE-MODEL section 7): its life through every op (absent at alloc, a checkpoint
# and a rollback of an absent carry, partial accepts of every kind); two hosting layers of three,
# batched with padding, in f16-pool mode. States of the hosting layers only, after the ops that move
# the carry (keeps fixtures/traces under its size budget).
rec ple_tiny_f32_every_op "PLE carry: every op, h f32, an absent carry checkpointed and restored; states of layer 0" \
  --outputs --state-layers 0 --states 2,3,6,7,10,11,13,16,17,18,22 \
  --preset ple-tiny --h-mode f32 --seed 24 --capacity 5 \
  --ops "alloc; checkpoint; prefill 2; rollback 0; prefill 5; checkpoint; verify 4; commit 2 4; decode;
         checkpoint_async; verify 3 wy; rollback 1; decode; rollback 0; snapshot_save 0; decode; snapshot_restore 0;
         verify 5; rollback_and_checkpoint_async 2; decode; release; alloc; prefill 2"
rec ple_odd_f16pool_batched "PLE carry on two layers of three: batched decode/verify with padding, h f16-pool, tiered capacities; states of layers 0 and 2" \
  --outputs --state-layers 0,2 --states 6,7,8,11 --preset ple-odd --h-mode f16-pool --seed 25 --slots 3 --capacity 4,3,2 \
  --ops "alloc 3 @0; alloc 3 @1; prefill 4 @0; prefill 3 @1; checkpoint @0; decode @1,pad,0; verify 4 @0,1;
         commit 2 4 @0; rollback 3 @1; verify 3 wy @pad,1,0; rollback 0 @0; decode @0,1"

if /usr/bin/python3 -c "import h5py" 2>/dev/null; then
  /usr/bin/python3 "$root/scripts/make_faulty_traces.py" "$out" "$out/faulty"
else
  echo "record_golden: faulty traces not regenerated (no h5py for /usr/bin/python3): run scripts/make_faulty_traces.py where it is"
fi
du -ch "$out"/*.h5 "$out"/faulty/*.h5 | tail -1
