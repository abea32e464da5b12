/* Deliberately bad plug-ins, one per build (tests/plugin.cmake): ssmcheck must refuse each at
 * load with exit 2 and a message naming what is wrong.
 *   BAD_NO_ENTRY      exports no ssmcheck_plugin()
 *   BAD_ABI           built against "ABI 999"
 *   BAD_MISSING_CALL  its table leaves required members NULL
 * Written in C through nothing but plugin/ssmcheck_plugin.h (the header must be plain C). */
#include "plugin/ssmcheck_plugin.h"

#ifndef BAD_NO_ENTRY
static void* create(const char* options, ssmp_error* err) {
  (void)options;
  (void)err;
  static int instance;
  return &instance;
}
static void destroy(void* self) { (void)self; }

static ssmp_plugin table;

SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  table.abi_version = SSMP_ABI_VERSION;
  table.struct_size = sizeof(ssmp_plugin);
  table.name = "a deliberately bad plug-in";
  table.create = create;
  table.destroy = destroy;
#ifdef BAD_ABI
  table.abi_version = 999;
#endif
  return &table; /* BAD_MISSING_CALL: every op member is NULL */
}
#else
SSMP_EXPORT int not_the_entry_point(void) { return 0; }
#endif
