// The allocator setting of copy-heavy processes (see keep_freed_memory.h).
#include "core/keep_freed_memory.h"

#include <cstddef>  // defines __GLIBC__ on glibc (features.h), so the check below can see it

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ssm {

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc refuses more (HEAP_MAX_SIZE / 2 on 64-bit)
  mallopt(M_TRIM_THRESHOLD, -1);        // never trim: -1 converts to the largest size
#endif
}

}  // namespace ssm
