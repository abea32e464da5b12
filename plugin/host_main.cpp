// ssmcheck-plugin-host PATH.so: runs a plug-in in a process of its own for ssmcheck
// (plugin/host_server.h). Not meant to be started by hand.
#include <cstdio>

#include "plugin/host_server.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ssmcheck-plugin-host PATH.so (started by ssmcheck for --backend plugin:PATH.so)\n");
    return 2;
  }
  return ssm::plugin::serve_plugin(argv[1]);
}
