/* A plug-in that is the installed reference plug-in (docs/ci.md's test): it loads it and returns
 * its table, so a CI recipe's gate on it passes through the whole installed path (the plug-in
 * host beside ssmcheck, the traces under share/ssmcheck). */
#include <dlfcn.h>
#include <stddef.h>

#include <ssmcheck/ssmcheck_plugin.h>

SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  void* lib = dlopen(REFERENCE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return NULL;
  ssmp_entry_fn entry;
  *(void**)&entry = dlsym(lib, SSMP_ENTRY_SYMBOL);
  return entry ? entry() : NULL;
}
