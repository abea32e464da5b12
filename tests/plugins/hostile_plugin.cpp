// A plug-in that misbehaves on purpose (tests/hosted_plugin_test.cpp): ssmcheck's reference as a
// plug-in, with one fault injected into one call. Options: fault=KIND,at=CALL[,nth=N] (the N-th
// call of that name, default 1). KIND: exit0, exit3, abort, segv, stack (overflow), hang (blocks),
// spin (busy), sigkill (killed), stdout (prints 64 KiB and goes on correctly), overrun (writes 4 KiB past an output
// buffer), overrun_small (writes 4 bytes past it). CALL: create, create_pool, alloc, prefill,
// decode, verify, checkpoint, commit, rollback, export_state. SSMCHECK_HOSTILE_AT_LOAD=exit0|segv
// misbehaves while the library is being loaded (a constructor).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/layer_spec.h"
#include "plugin/backend_plugin.h"
#include "plugin/config_model.h"
#include "reference/reference_backend.h"

namespace {

using namespace ssm;

const ssmp_plugin* inner() {
  static const ssmp_plugin* t = plugin::expose(
      {"hostile (the reference with one fault)", SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE,
       [](const std::string&) { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); }});
  return t;
}

struct Hostile {
  void* self = nullptr;
  std::string kind, at;
  int nth = 1, seen = 0;
  std::vector<LayerSpec> layers;
};

volatile int g_sink = 0;
// the busy loop counts in unsigned arithmetic: a signed counter overflows after 2^31 turns, which
// UBSan (scripts/sanitize.sh) reports and ends the host with exit 1 before the call timeout fires
volatile unsigned g_spin = 0;
int overflow(int depth) {  // no tail call: every frame stays
  volatile char pad[4096];
  pad[0] = char(depth);
  return overflow(depth + 1) + pad[0];
}

// Runs the fault when this is its call; returns true when the call should go on normally after.
void fault_point(Hostile& H, const char* call) {
  if (H.at != call || ++H.seen != H.nth) return;
  const std::string& k = H.kind;
  if (k == "exit0") std::exit(0);
  if (k == "exit3") std::exit(3);
  if (k == "abort") std::abort();
  if (k == "segv") ::raise(SIGSEGV);
  if (k == "sigkill") ::raise(SIGKILL);
  if (k == "stack") g_sink = overflow(0);
  if (k == "hang") ::pause();
  if (k == "spin")
    for (;;) g_spin = g_spin + 1u;
  if (k == "stdout") {
    std::string line(127, 'x');
    for (int i = 0; i < 512; ++i) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
}

// After an op's call: an overrun of output 0 of entry 0, layer 0.
void overrun_after(Hostile& H, const char* call, ssmp_layer_io* io, int rows) {
  if (H.at != call || H.seen != H.nth || H.layers.empty()) return;
  float* end = io[0].out + size_t(rows) * size_t(H.layers[0].out_dim());
  if (H.kind == "overrun") end[1023] = 1.0f;
  if (H.kind == "overrun_small") end[0] = 1.0f;
}

Hostile& self(void* p) { return *static_cast<Hostile*>(p); }

void* create(const char* options, ssmp_error* err) {
  auto H = std::make_unique<Hostile>();
  std::string o = options ? options : "";
  size_t start = 0;
  while (start < o.size()) {
    const size_t end = std::min(o.find(',', start), o.size());
    const std::string kv = o.substr(start, end - start);
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (key == "fault") H->kind = value;
    else if (key == "at") H->at = value;
    else if (key == "nth") H->nth = std::atoi(value.c_str());
    start = end + 1;
  }
  fault_point(*H, "create");
  H->self = inner()->create("", err);
  if (!H->self) return nullptr;
  return H.release();
}
void destroy(void* p) {
  inner()->destroy(self(p).self);
  delete static_cast<Hostile*>(p);
}
int create_pool(void* p, const ssmp_config* c, ssmp_error* err) {
  fault_point(self(p), "create_pool");
  self(p).layers = plugin::model_of(c).spec.layers;
  return inner()->create_pool(self(p).self, c, err);
}
int alloc(void* p, int m, int* slot, ssmp_error* err) {
  fault_point(self(p), "alloc");
  return inner()->alloc(self(p).self, m, slot, err);
}
int release(void* p, int slot, ssmp_error* err) { return inner()->release(self(p).self, slot, err); }
int prefill(void* p, int slot, int rows, ssmp_layer_io* io, ssmp_error* err) {
  fault_point(self(p), "prefill");
  const int rc = inner()->prefill(self(p).self, slot, rows, io, err);
  overrun_after(self(p), "prefill", io, rows);
  return rc;
}
int decode(void* p, int n, const int* slots, ssmp_layer_io* io, ssmp_error* err) {
  fault_point(self(p), "decode");
  const int rc = inner()->decode(self(p).self, n, slots, io, err);
  overrun_after(self(p), "decode", io, 1);
  return rc;
}
int verify(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, ssmp_error* err) {
  fault_point(self(p), "verify");
  const int rc = inner()->verify(self(p).self, n, slots, k, arm, io, err);
  overrun_after(self(p), "verify", io, k);
  return rc;
}
int checkpoint(void* p, int slot, int async, ssmp_error* err) {
  fault_point(self(p), "checkpoint");
  return inner()->checkpoint(self(p).self, slot, async, err);
}
int commit(void* p, int slot, int n, int k, ssmp_error* err) {
  fault_point(self(p), "commit");
  return inner()->commit(self(p).self, slot, n, k, err);
}
int rollback(void* p, int slot, int n, int c, ssmp_error* err) {
  fault_point(self(p), "rollback");
  return inner()->rollback(self(p).self, slot, n, c, err);
}
int to_f16(void* p, int slot, ssmp_error* err) { return inner()->to_f16(self(p).self, slot, err); }
int snapshot_save(void* p, int slot, int s, ssmp_error* err) { return inner()->snapshot_save(self(p).self, slot, s, err); }
int snapshot_restore(void* p, int slot, int s, ssmp_error* err) {
  return inner()->snapshot_restore(self(p).self, slot, s, err);
}
int export_state(void* p, int slot, ssmp_state* st, ssmp_error* err) {
  Hostile& H = self(p);
  fault_point(H, "export_state");
  const int rc = inner()->export_state(H.self, slot, st, err);
  if (H.at == "export_state" && H.seen == H.nth && !H.layers.empty()) {
    char* end = static_cast<char*>(st->layers[0].h) + size_t(H.layers[0].h_elems()) * 4;
    if (H.kind == "overrun") end[4095] = 1;
    if (H.kind == "overrun_small") end[0] = 1;
  }
  return rc;
}
int prefill_ple(void* p, int slot, int rows, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  fault_point(self(p), "prefill");
  return inner()->prefill_ple(self(p).self, slot, rows, io, ple, err);
}
int decode_ple(void* p, int n, const int* slots, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  fault_point(self(p), "decode");
  return inner()->decode_ple(self(p).self, n, slots, io, ple, err);
}
int verify_ple(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
               ssmp_error* err) {
  fault_point(self(p), "verify");
  return inner()->verify_ple(self(p).self, n, slots, k, arm, io, ple, err);
}

__attribute__((constructor)) void at_load() {
  const char* f = std::getenv("SSMCHECK_HOSTILE_AT_LOAD");
  if (!f) return;
  if (!std::strcmp(f, "exit0")) std::exit(0);
  if (!std::strcmp(f, "segv")) ::raise(SIGSEGV);
}

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin table = {SSMP_ABI_VERSION, sizeof(ssmp_plugin), "hostile (the reference with one fault)",
                                    SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE,
                                    create, destroy, create_pool, alloc, release, prefill, decode, verify, checkpoint,
                                    commit, rollback, to_f16, snapshot_save, snapshot_restore, export_state, nullptr,
                                    nullptr, prefill_ple, decode_ple, verify_ple};
  return &table;
}
