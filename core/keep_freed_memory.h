// The allocator setting of processes that copy large tensors on every op (campaigns, replays):
// glibc returns a freed block above its mmap threshold (dynamic, up to 32 MiB) or above its trim
// threshold to the system, so the next tensor of that size faults every page in again. On
// qwen3-next-80b with 2 layers (2 MiB per h, up to 9 h-sized fields per layer and sequence)
// that fault traffic was two thirds of a CPU campaign's time (Dec 1: 12 -> 38 ops/s, the same
// cases and verdict). Keeps freed memory in the process instead: blocks up to 32 MiB (glibc's
// ceiling for the threshold) come from the heap, and the heap is never trimmed. Idempotent; a
// no-op off glibc.
#pragma once

namespace ssm {
void keep_freed_memory();
}
