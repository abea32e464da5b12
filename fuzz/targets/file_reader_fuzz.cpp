// libFuzzer target: the trace and dump readers (formats/trace.cpp, formats/dump.cpp) on arbitrary
// bytes, built by scripts/fuzz.sh with clang and ASan/UBSan. The input is written to a file and
// read as a trace and as a dump; each read must either succeed or be refused with FormatError
// (the reader's "FILE: OBJECT: what"). Any other exception, a crash or a sanitizer report in
// ssmcheck's code is a finding. libhdf5 itself is not instrumented, and a file that crashes it is
// contained by the readers' forked probe (formats/crash_probe.h) and refused like any other bad
// file. The seed corpus (corpus/file_reader/) holds a small valid trace and dump, so the mutations
// start from real structure.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "formats/dump.h"
#include "formats/trace.h"

namespace {

std::string scratch_path() { return "/tmp/ssmcheck-file-reader-fuzz-" + std::to_string(getpid()) + ".h5"; }

// The one scratch file of this process, removed when it exits (libFuzzer ends with exit() after -runs).
const std::string& scratch_file() {
  static const std::string path = [] {
    std::atexit([] { std::remove(scratch_path().c_str()); });
    return scratch_path();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = scratch_file();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  try {
    (void)ssm::formats::read_trace(path);
  } catch (const ssm::formats::FormatError&) {
    // a clear refusal naming the object is the contract for bad input
  }
  try {
    (void)ssm::formats::read_dump(path);
  } catch (const ssm::formats::FormatError&) {
  }
  return 0;
}
