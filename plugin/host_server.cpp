// ssmcheck-plugin-host's server (see host_server.h).
#include "plugin/host_server.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/layer_attrs.h"
#include "core/layer_spec.h"
#include "core/model.h"
#include "plugin/capabilities_wire.h"
#include "plugin/host_wire.h"
#include "plugin/named_abi.h"
#include "plugin/plugin_library.h"

namespace ssm::plugin {

namespace {

using nlohmann::json;

// --- fenced output buffers -----------------------------------------------------------------

const size_t kPage = size_t(::sysconf(_SC_PAGESIZE));
constexpr unsigned char kCanary = 0xA5;

// What the fatal-signal handler reports: the running call, and the fences by address. A call
// sent compact is named from g_op and g_op_slot when it is reported, not formatted on every call.
char g_call[256] = "start-up (loading the plug-in)";
const char* g_op = nullptr;  // the running compact call's name, or null: g_call names the call
int g_op_slot = -1;          // its slot, or -1 (decode, verify, alloc)

// A buffer's name, kept in parts and written out only when it is reported (an overrun, a fatal
// signal): "HEAD[ entry E][ layer L] FIELD[ I]", e.g. "the output of entry 0 layer 1
// ([rows][out_dim])", "export_state's layer 0 h_intermediate 2".
struct FenceTag {
  const char* head = "";
  int entry = -1, layer = -1;  // -1: not part of the name
  const char* field = "";
  int index = -1;
};

// v >= 0 in decimal into buf (n >= 12); async-signal-safe.
void int_text(int v, char* buf, size_t n) {
  char d[12];
  int k = 0;
  unsigned u = v < 0 ? 0u : unsigned(v);
  do d[k++] = char('0' + u % 10);
  while ((u /= 10) && k < 11);
  size_t at = 0;
  while (k > 0 && at + 1 < n) buf[at++] = d[--k];
  buf[at] = '\0';
}

// The tag's text into buf (NUL-terminated, cut at n); async-signal-safe: no allocation, no locale.
void tag_text(const FenceTag& t, char* buf, size_t n) {
  size_t at = 0;
  auto put = [&](const char* s) {
    while (*s && at + 1 < n) buf[at++] = *s++;
  };
  auto num = [&](int v) {
    char d[12];
    int_text(v, d, sizeof d);
    put(d);
  };
  put(t.head);
  if (t.entry >= 0) put(" entry "), num(t.entry);
  if (t.layer >= 0) put(" layer "), num(t.layer);
  put(" ");
  put(t.field);
  if (t.index >= 0) put(" "), num(t.index);
  buf[at] = '\0';
}

struct FenceName {
  const char* lo;
  const char* hi;
  FenceTag tag;
};
constexpr int kMaxFences = 8192;
FenceName g_fences[kMaxFences];
int g_n_fences = 0;

// A buffer whose end lies just below an inaccessible page (16-byte aligned start, canary bytes in
// the gap), with an inaccessible page before it too.
class Fenced {
 public:
  Fenced() = default;
  ~Fenced() {
    if (map_) ::munmap(map_, map_bytes_);
  }
  Fenced(const Fenced&) = delete;
  Fenced& operator=(const Fenced&) = delete;
  Fenced(Fenced&& o) noexcept { *this = std::move(o); }
  Fenced& operator=(Fenced&& o) noexcept {
    std::swap(map_, o.map_);
    std::swap(map_bytes_, o.map_bytes_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  // Room for `bytes`, named for the reports; canaries set.
  char* take(size_t bytes, const FenceTag& tag, int fence) {
    const size_t room = (bytes + 15) / 16 * 16;
    if (!map_ || room > map_bytes_ - 2 * kPage) {
      // at least twice the room it had: buffers reused across layers of several sizes settle fast
      const size_t had = map_ ? map_bytes_ - 2 * kPage : 0;
      if (map_) ::munmap(map_, map_bytes_);
      map_bytes_ = (std::max(room, 2 * had) + kPage - 1) / kPage * kPage + 2 * kPage;
      void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::runtime_error("the host cannot map " + std::to_string(map_bytes_) + " bytes");
      map_ = static_cast<char*>(p);
      ::mprotect(map_, kPage, PROT_NONE);
      ::mprotect(map_ + map_bytes_ - kPage, kPage, PROT_NONE);
    }
    char* upper = map_ + map_bytes_ - kPage;
    data_ = upper - room;
    bytes_ = bytes;
    std::memset(data_ + bytes, kCanary, room - bytes);
    if (fence < kMaxFences) {
      FenceName& f = g_fences[fence];
      f.lo = map_;
      f.hi = map_ + map_bytes_;
      f.tag = tag;
      if (fence >= g_n_fences) g_n_fences = fence + 1;
    }
    return data_;
  }
  bool canary_intact() const {
    const size_t room = (bytes_ + 15) / 16 * 16;
    for (size_t i = bytes_; i < room; ++i)
      if (static_cast<unsigned char>(data_[i]) != kCanary) return false;
    return true;
  }
  const char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  char* map_ = nullptr;
  size_t map_bytes_ = 0;
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

// The buffers of one call, in order, reused across calls.
class FencedSet {
 public:
  void begin() { used_ = 0; }
  char* take(size_t bytes, const FenceTag& tag) {
    if (used_ == bufs_.size()) {
      bufs_.emplace_back();
      tags_.emplace_back();
    }
    tags_[used_] = tag;
    const size_t i = used_++;
    return bufs_[i].take(bytes, tag, int(i));
  }
  // "" when every canary is intact, else the buffers written past
  std::string overrun() const {
    std::string s;
    for (size_t i = 0; i < used_; ++i)
      if (!bufs_[i].canary_intact()) {
        char name[160];
        tag_text(tags_[i], name, sizeof name);
        s += (s.empty() ? "" : ", ") + std::string(name);
      }
    return s;
  }

 private:
  std::vector<Fenced> bufs_;
  std::vector<FenceTag> tags_;
  size_t used_ = 0;
};

// --- fatal signals ----------------------------------------------------------------------------

void say(const char* s) { (void)!::write(2, s, std::strlen(s)); }

void on_fatal(int sig, siginfo_t* info, void*) {
  say("ssmcheck-plugin-host: fatal signal ");
  char num[32];
  std::snprintf(num, sizeof num, "%d (%s)", sig, sigdescr_np(sig) ? sigdescr_np(sig) : "?");
  say(num);
  say(" during ");
  if (g_op) {  // a compact call: "commit(slot 0)", "decode()"
    say(g_op);
    say("(");
    if (g_op_slot >= 0) {
      char slot[32];
      int_text(g_op_slot, slot, sizeof slot);
      say("slot ");
      say(slot);
    }
    say(")");
  } else {
    say(g_call);
  }
  if ((sig == SIGSEGV || sig == SIGBUS) && info) {
    const char* a = static_cast<const char*>(info->si_addr);
    for (int i = 0; i < g_n_fences; ++i)
      if (a >= g_fences[i].lo && a < g_fences[i].hi) {
        say(a >= g_fences[i].hi - kPage ? ": a write past the end of " : ": an access before the start of ");
        char name[160];
        tag_text(g_fences[i].tag, name, sizeof name);
        say(name);
        break;
      }
  }
  say("\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_fatal_handlers() {
  static std::vector<char> alt(1 << 16);  // a stack overflow still gets its message
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::sigaction(s, &sa, nullptr);
}

// --- the model of create_pool -------------------------------------------------------------------

struct PoolOf {
  std::vector<LayerSpec> layers;
  PoolConfig pool;
};

// A layer of create_pool's request: by its attributes (core/layer_attrs.h) when it has them, as
// every ssmcheck that knows SSMP_BY_NAME sends, so that any kind core knows arrives whole; else by
// the members of the kinds of before.
LayerSpec layer_of(const json& d, size_t l) {
  if (d.contains("attrs")) {
    std::vector<LayerAttr> attrs;
    for (const auto& [name, value] : d.at("attrs").items()) attrs.push_back({name, value.get<std::string>()});
    return layer_from_attrs(d.at("kind").get<std::string>(), attrs, "layer " + std::to_string(l));
  }
  LayerSpec s;
  s.kind = parse_layer_kind(d.at("kind").get<std::string>());
  if (s.kind == LayerKind::mamba2) {
    s.nh = d.at("nh");
    s.hp = d.at("hp");
    s.ns = d.at("ns");
    s.ng = d.at("ng");
    s.norm_before_gate = d.at("norm_before_gate");
    s.dt_min = d.at("dt_min");
    s.dt_max = d.at("dt_max").is_null() ? std::numeric_limits<float>::infinity() : d.at("dt_max").get<float>();
  } else {
    s.nk = d.at("nk");
    s.nv = d.at("nv");
    s.kd = d.at("kd");
    s.vd = d.at("vd");
    s.output_gate = d.at("output_gate") == "sigmoid" ? OutputGate::sigmoid : OutputGate::silu;
  }
  s.d_conv = d.at("d_conv");
  s.eps = d.at("eps");
  s.conv_bias = d.at("conv_bias");
  if (!d.at("ple").is_null()) {
    const json& p = d.at("ple");
    s.ple.channels = p.at("channels");
    s.ple.ngram_size = p.at("ngram_size");
    s.ple.k_size = p.at("k_size");
    s.ple.dilation = p.at("dilation");
    s.ple.eos_id = p.at("eos_id");
  }
  s.validate();
  return s;
}

// --- the server -----------------------------------------------------------------------------------

class Server {
 public:
  Server(const ssmp_plugin* t, int channel, wire::Arena arena, wire::Bell bell)
      : t_(t), channel_(channel), arena_(std::move(arena)), bell_(std::move(bell)) {}

  // The hello on the socket; then, with a doorbell, every frame through the arena (until ssmcheck
  // ends this process), else on the socket until ssmcheck closes it.
  void run() {
    wire::Frame f;
    bool via_bell = false;
    for (;;) {
      if (via_bell) {
        bell_.receive(wire::Bell::kToHost, arena_, &f, {});
      } else {
        if (!wire::read_frame(channel_, &f)) return;
        arena_.follow(f.arena_bytes);
      }
      json reply;
      std::vector<wire::Arena::Piece>& out = out_;
      out.clear();
      try {
        // a compact call's plain success is answered compact (reply stays null), anything else in JSON
        reply = f.compact ? compact_call(f, &out) : handle(f, &out);
      } catch (const std::exception& e) {
        reply = {{"status", SSMP_ERROR}, {"message", std::string("ssmcheck-plugin-host: ") + e.what()}};
        out.clear();
      }
      g_op = nullptr;
      bell_.set_exporting(-1);
      std::snprintf(g_call, sizeof g_call, "%s", "(between calls)");
      const bool hello = !f.compact && f.msg.value("call", std::string()) == "hello";
      if (hello && bell_.on()) {
        reply["bell"] = true;
        reply["compact"] = true;  // the calls of ops may come as Compact records (host_wire.h)
      }
      if (via_bell && reply.is_null()) {
        bell_.send(wire::Bell::kToClient, arena_, compact_reply_, compact_reply_slots_.data(), out);
      } else if (via_bell) {
        bell_.send(wire::Bell::kToClient, arena_, reply, out);
      } else {
        const auto at = arena_.put(out);
        wire::write_frame(channel_, reply, at, arena_.size());
      }
      via_bell = via_bell || (hello && bell_.on());
    }
  }

 private:
  struct Inst {
    void* self = nullptr;
    PoolOf pool;
    bool has_pool = false;
    std::set<int> claimed;  // the slots allocated and not released: what kExportAfter exports
  };

  const float* in(const wire::Frame& f, size_t i, const std::string& what) {
    return in(f, i, [&] { return what; });
  }
  // the same, the name built only for an error
  template <class What>
  const float* in(const wire::Frame& f, size_t i, const What& what) {
    if (i >= f.arrays.size()) throw std::runtime_error("the request has no array for " + what());
    const auto [off, bytes] = f.arrays[i];
    if (!bytes) return nullptr;
    if (off > arena_.size() || bytes > arena_.size() - off) arena_.at(off, bytes, what());  // throws naming it
    return reinterpret_cast<const float*>(arena_.base() + off);
  }

  static json status_of(int rc, const ssmp_error& err) {
    if (rc == SSMP_OK) return {{"status", SSMP_OK}};
    return {{"status", rc},
            {"kind", std::string(err.kind, strnlen(err.kind, sizeof err.kind))},
            {"message", std::string(err.message, strnlen(err.message, sizeof err.message))}};
  }

  // A call's status, or an error naming the buffers the plug-in wrote past.
  json checked(int rc, const ssmp_error& err, const std::string& call) {
    const std::string over = fenced_.overrun();
    if (!over.empty())
      return {{"status", SSMP_ERROR},
              {"message", call + " wrote past the end of " + over + " (caught by the host's canary bytes)"}};
    return status_of(rc, err);
  }

  // the running call for the fatal-signal handler: its name and slot(s), not the whole request
  // (this runs on every call)
  void mark(const json& req) {
    const auto slot = req.find("slot");
    std::snprintf(g_call, sizeof g_call, "%s(%s%s)", req.value("call", std::string("?")).c_str(),
                  slot != req.end() ? "slot " : "", slot != req.end() ? slot->dump().c_str() : "");
  }

  // A call sent as a Compact record (an op's): null when it succeeded (the reply is
  // compact_reply_), else its JSON reply (a refusal or error with its message, an overrun).
  json compact_call(const wire::Frame& f, std::vector<wire::Arena::Piece>* out) {
    const wire::Compact& c = f.c;
    const wire::Op op = wire::Op(c.op);
    g_op = wire::op_name(op);
    g_op_slot = op == wire::Op::decode || op == wire::Op::verify || op == wire::Op::alloc ? -1 : c.slot;
    auto it = insts_.find(c.instance);
    if (it == insts_.end()) throw std::runtime_error("no instance " + std::to_string(c.instance));
    Inst& I = it->second;
    ssmp_error err{};
    compact_reply_ = wire::Compact{};
    compact_reply_.op = c.op;
    compact_reply_.instance = c.instance;
    int rc = SSMP_OK;
    switch (op) {
      case wire::Op::prefill:
      case wire::Op::decode:
      case wire::Op::verify: {
        if (!I.has_pool) throw std::runtime_error(std::string(g_op) + " before create_pool");
        const bool prefill = op == wire::Op::prefill;
        const int* slots = prefill ? &c.slot : f.slots.data();
        const size_t entries = prefill ? 1 : f.slots.size();
        const int rows = op == wire::Op::decode ? 1 : c.rows;
        json r = rows_call(I, op, slots, entries, rows, c.arg, f, out, &err);
        if (r.at("status") != SSMP_OK || r.contains("message")) return r;
        return c.status & wire::kExportAfter ? export_after(I, op, out, /*fresh=*/false) : json();
      }
      case wire::Op::alloc: {
        int slot = -1;
        rc = t_->alloc(I.self, c.arg, &slot, &err);
        compact_reply_.slot = slot;
        if (rc != SSMP_OK) {
          json r = status_of(rc, err);
          r["slot"] = slot;
          return r;
        }
        I.claimed.insert(slot);
        break;
      }
      case wire::Op::release:
        rc = t_->release(I.self, c.slot, &err);
        if (rc == SSMP_OK) I.claimed.erase(c.slot);
        break;
      case wire::Op::checkpoint: rc = t_->checkpoint(I.self, c.slot, c.arg ? 1 : 0, &err); break;
      case wire::Op::commit: rc = t_->commit(I.self, c.slot, c.n, c.k, &err); break;
      case wire::Op::rollback: rc = t_->rollback(I.self, c.slot, c.n, c.arg ? 1 : 0, &err); break;
      case wire::Op::to_f16: rc = t_->to_f16(I.self, c.slot, &err); break;
      case wire::Op::snapshot_save: rc = t_->snapshot_save(I.self, c.slot, c.arg, &err); break;
      case wire::Op::snapshot_restore: rc = t_->snapshot_restore(I.self, c.slot, c.arg, &err); break;
    }
    if (rc != SSMP_OK) return status_of(rc, err);
    return c.status & wire::kExportAfter ? export_after(I, op, out, /*fresh=*/true) : json();
  }

  // kExportAfter (host_wire.h): every slot the instance holds, exported after the op succeeded,
  // their heads as the reply's slots and their arrays after the op's outputs (fenced buffers
  // taken after the outputs': `fresh` when the op had none). Null when all went well (the reply
  // is compact_reply_), else the failing export's error, naming it, as the op's reply.
  json export_after(Inst& I, wire::Op op, std::vector<wire::Arena::Piece>* out, bool fresh) {
    std::vector<int32_t>& words = compact_reply_slots_;
    words.clear();
    for (const int slot : I.claimed) {
      if (slot < 0 || slot >= I.pool.pool.max_slots) continue;  // ssmcheck refuses such an alloc itself
      bell_.set_exporting(slot);  // a crash or hang from here on is reported as one of export_state
      g_op = "export_state";
      g_op_slot = slot;
      ssmp_error err{};
      wire::ExportHead h;
      json r = export_slot(I, slot, out, &err, &h, fresh);
      fresh = false;
      bell_.set_exporting(-1);
      if (r.at("status") != SSMP_OK) {
        out->clear();
        words.clear();
        // an error of the op's call (a refusal of an export is no refusal of the op)
        return {
            {"status", SSMP_ERROR},
            {"message", "export_state(slot " + std::to_string(slot) + "), sent with the reply of " + wire::op_name(op) +
                            ": " + r.value("kind", std::string()) +
                            (r.value("kind", std::string()).empty() ? "" : ": ") + r.value("message", std::string())}};
      }
      h.slot = slot;
      wire::append_words(h, &words);
    }
    compact_reply_.n_slots = uint32_t(words.size());
    return json();
  }

  json handle(const wire::Frame& f, std::vector<wire::Arena::Piece>* out) {
    const json& req = f.msg;
    const std::string call = req.at("call");
    mark(req);
    ssmp_error err{};
    if (call == "hello") {
      json hello = {{"status", SSMP_OK},
                    {"name", t_->name ? t_->name : ""},
                    {"flags", t_->flags},
                    {"async", t_->pause_async_copies != nullptr && t_->async_pending != nullptr},
                    {"perturbable", offers_perturbed_schedule(*t_)},
                    {"field_digests", offers_field_digests(*t_)}};
      if (const ssmp_capabilities* c = declared_capabilities(*t_)) hello["capabilities"] = capabilities_json(*c);
      return hello;
    }
    if (call == "create") {
      const std::string options = req.at("options");
      void* self = t_->create(options.c_str(), &err);
      if (!self) return status_of(SSMP_ERROR, err);
      const int64_t id = next_id_++;
      insts_[id].self = self;
      return {{"status", SSMP_OK}, {"instance", id}};
    }
    const int64_t id = req.at("instance");
    auto it = insts_.find(id);
    if (it == insts_.end()) throw std::runtime_error("no instance " + std::to_string(id));
    Inst& I = it->second;
    if (call == "destroy") {
      t_->destroy(I.self);
      insts_.erase(it);
      return {{"status", SSMP_OK}};
    }
    if (call == "create_pool") return create_pool(I, f, &err);
    if (call == "alloc") {
      int slot = -1;
      const int rc = t_->alloc(I.self, req.at("min_capacity"), &slot, &err);
      if (rc == SSMP_OK) I.claimed.insert(slot);
      json r = status_of(rc, err);
      r["slot"] = slot;
      return r;
    }
    auto slot = [&] { return req.at("slot").get<int>(); };
    if (call == "release") {
      const int rc = t_->release(I.self, slot(), &err);
      if (rc == SSMP_OK) I.claimed.erase(slot());
      return status_of(rc, err);
    }
    if (call == "checkpoint") return status_of(t_->checkpoint(I.self, slot(), req.at("async") ? 1 : 0, &err), err);
    if (call == "commit") return status_of(t_->commit(I.self, slot(), req.at("n"), req.at("k"), &err), err);
    if (call == "rollback")
      return status_of(t_->rollback(I.self, slot(), req.at("n"), req.at("and_checkpoint") ? 1 : 0, &err), err);
    if (call == "to_f16") return status_of(t_->to_f16(I.self, slot(), &err), err);
    if (call == "snapshot_save") return status_of(t_->snapshot_save(I.self, slot(), req.at("snap"), &err), err);
    if (call == "snapshot_restore") return status_of(t_->snapshot_restore(I.self, slot(), req.at("snap"), &err), err);
    if (call == "pause_async_copies")
      return {{"status", SSMP_OK}, {"supported", t_->pause_async_copies ? t_->pause_async_copies(I.self, req.at("on") ? 1 : 0) : 0}};
    if (call == "perturb_schedule")
      return {
          {"status", SSMP_OK},
          {"on", offers_perturbed_schedule(*t_) ? t_->perturb_schedule(I.self, req.at("seed").get<uint64_t>()) : 0}};
    if (call == "async_pending")
      return {{"status", SSMP_OK}, {"pending", t_->async_pending ? t_->async_pending(I.self, slot()) : 0}};
    if (!I.has_pool) throw std::runtime_error(call + " before create_pool");
    if (call == "prefill" || call == "decode" || call == "verify") {
      const bool prefill = call == "prefill";
      const std::vector<int> slots =
          prefill ? std::vector<int>{req.at("slot").get<int>()} : req.at("slots").get<std::vector<int>>();
      const int rows = prefill ? req.at("rows").get<int>() : call == "decode" ? 1 : req.at("k").get<int>();
      const int arm = req.value("arm", std::string("exact")) == "wy" ? SSMP_ARM_WY : SSMP_ARM_EXACT;
      const wire::Op op = prefill ? wire::Op::prefill : call == "decode" ? wire::Op::decode : wire::Op::verify;
      return rows_call(I, op, slots.data(), slots.size(), rows, arm, f, out, &err);
    }
    if (call == "export_state") return export_state(I, slot(), out, &err);
    if (call == "field_digests" && offers_field_digests(*t_)) return field_digests(I, slot(), &err);
    if (call == "export_fields" && offers_field_digests(*t_))
      return export_fields(I, slot(), req.at("fields"), out, &err);
    throw std::runtime_error("unknown call '" + call + "'");
  }

  json create_pool(Inst& I, const wire::Frame& f, ssmp_error* err) {
    const json& req = f.msg;
    PoolOf p;
    for (const json& d : req.at("layers")) p.layers.push_back(layer_of(d, p.layers.size()));
    const std::string mode = req.at("h_mode");
    p.pool.h_mode = mode == "f16" ? HMode::f16 : mode == "f16-pool" ? HMode::f16_pool : HMode::f32;
    p.pool.max_slots = req.at("max_slots");
    p.pool.h_capacity = req.at("h_capacity").get<std::vector<int>>();
    p.pool.conv_capacity = req.at("conv_capacity");
    p.pool.snapshot_slots = req.at("snapshot_slots");
    p.pool.validate();
    const size_t n = p.layers.size();
    std::vector<ssmp_layer> layers(n);
    std::vector<ssmp_mamba2> m2(n, ssmp_mamba2{});
    std::vector<ssmp_ple> ple(n, ssmp_ple{});
    bool any_m2 = false, any_ple = false;
    size_t next = 0;
    std::vector<std::map<std::string, const float*>> weights(n);
    for (size_t l = 0; l < n; ++l) {
      const LayerSpec& s = p.layers[l];
      const std::string at = "layer " + std::to_string(l) + " ";
      // the weights in the wire's order, which names them as core does (LayerSpec::weights)
      std::map<std::string, const float*>& w = weights[l];
      for (const WeightField& wf : s.weights()) w[wf.name] = in(f, next++, at + wf.name);
      // the positional structs name the weights their kinds have (NULL for one a kind lacks: a kind
      // added later reaches a by-name plug-in through layer_descs only)
      auto at_name = [&w](const char* name) -> const float* {
        const auto it = w.find(name);
        return it == w.end() ? nullptr : it->second;
      };
      ssmp_layer& L = layers[l];
      L.kind = s.kind == LayerKind::mamba2 ? SSMP_LAYER_MAMBA2 : SSMP_LAYER_GDN;
      if (s.kind == LayerKind::gdn) {
        L.nk = s.nk, L.nv = s.nv, L.kd = s.kd, L.vd = s.vd;
        L.sigmoid_gate = s.output_gate == OutputGate::sigmoid ? 1 : 0;
      }
      L.d_conv = s.d_conv;
      L.eps = s.eps;
      L.conv_w = at_name("conv_w");
      L.conv_bias = at_name("conv_bias");
      L.A_log = at_name("A_log");
      L.dt_bias = at_name("dt_bias");
      L.norm_w = at_name("norm_w");
      if (s.kind == LayerKind::mamba2) {
        m2[l] = {s.nh, s.hp, s.ns, s.ng, s.norm_before_gate ? 1 : 0, s.dt_min, s.dt_max, at_name("D")};
        any_m2 = true;
      }
      if (s.ple.hosted()) {
        ple[l] = {s.ple.channels, s.ple.ngram_size, s.ple.k_size, s.ple.dilation, s.ple.eos_id, at_name("ple_w")};
        any_ple = true;
      }
    }
    const std::string name = req.value("model_name", std::string());
    ssmp_config c{};
    c.struct_size = sizeof c;
    c.model_name = name.c_str();
    c.n_layers = int(n);
    c.layers = layers.data();
    c.h_mode = p.pool.h_mode == HMode::f16 ? SSMP_H_F16 : p.pool.h_mode == HMode::f16_pool ? SSMP_H_F16_POOL : SSMP_H_F32;
    c.max_slots = p.pool.max_slots;
    c.h_capacity = p.pool.h_capacity.data();
    c.conv_capacity = p.pool.conv_capacity;
    c.snapshot_slots = p.pool.snapshot_slots;
    c.mamba2 = any_m2 ? m2.data() : nullptr;
    c.ple = any_ple ? ple.data() : nullptr;
    const LayerDescs descs(p.layers, [&](size_t l, const WeightField& wf) { return weights[l].at(wf.name); });
    c.layer_descs = descs.get();
    I.has_pool = false;
    const int rc = t_->create_pool(I.self, &c, err);
    if (rc == SSMP_OK) {
      I.pool = std::move(p);
      I.has_pool = true;
      I.claimed.clear();
    }
    return status_of(rc, *err);
  }

  static bool hosts_ple(const PoolOf& p) {
    for (const LayerSpec& s : p.layers)
      if (s.ple.hosted()) return true;
    return false;
  }

  // prefill (one slot), decode or verify: inputs read in place from the arena, outputs into fenced
  // buffers (reused across calls), named only when one is reported
  json rows_call(Inst& I, wire::Op op, const int* slots, size_t entries, int rows, int arm, const wire::Frame& f,
                 std::vector<wire::Arena::Piece>* out, ssmp_error* err) {
    const char* call = wire::op_name(op);
    const bool prefill = op == wire::Op::prefill;
    if (rows < 1 || entries == 0) throw std::runtime_error(std::string(call) + " of " + std::to_string(rows) + " rows");
    const bool with_ple = hosts_ple(I.pool);
    const size_t n = I.pool.layers.size();
    std::vector<ssmp_layer_io>& io = io_;
    std::vector<ssmp_ple_io>& ple = ple_io_;
    io.assign(entries * n, ssmp_layer_io{});
    ple.assign(entries * n, ssmp_ple_io{nullptr, nullptr, nullptr});
    std::vector<std::pair<const char*, size_t>>& outs = outs_;  // fenced outputs, in reply order
    outs.clear();
    fenced_.begin();
    size_t next = 0;
    for (size_t e = 0; e < entries; ++e)
      for (size_t l = 0; l < n; ++l) {
        const LayerSpec& s = I.pool.layers[l];
        auto at = [&](const char* what) {
          return "entry " + std::to_string(e) + " layer " + std::to_string(l) + " " + what;
        };
        ssmp_layer_io& x = io[e * n + l];
        x.x = in(f, next++, [&] { return at("x"); });
        x.a = in(f, next++, [&] { return at("a"); });
        x.b = in(f, next++, [&] { return at("b"); });
        x.z = in(f, next++, [&] { return at("z"); });
        const size_t bytes = size_t(rows) * size_t(s.out_dim()) * sizeof(float);
        x.out =
            reinterpret_cast<float*>(fenced_.take(bytes, {"the output of", int(e), int(l), "([rows][out_dim])", -1}));
        outs.emplace_back(reinterpret_cast<const char*>(x.out), bytes);
        if (s.ple.hosted() && with_ple) {
          ssmp_ple_io& p = ple[e * n + l];
          p.tokens = in(f, next++, [&] { return at("ple_tokens"); });
          p.x = in(f, next++, [&] { return at("ple_x"); });
          const size_t pb = size_t(rows) * size_t(s.ple.channels) * sizeof(float);
          p.out = reinterpret_cast<float*>(fenced_.take(pb, {"the PLE output of", int(e), int(l), "([rows][C])", -1}));
          outs.emplace_back(reinterpret_cast<const char*>(p.out), pb);
        }
      }
    int rc;
    const int k = rows;
    if (t_->flags & SSMP_BY_NAME) {  // the same inputs and outputs by name (plugin/named_abi.h)
      rows_io_.clear();
      for (size_t i = 0; i < entries * n; ++i)
        rows_io_.add(I.pool.layers[i % n], positional_input(io[i], ple[i]), io[i].out, ple[i].out);
      const int named = prefill ? SSMP_OP_PREFILL : op == wire::Op::decode ? SSMP_OP_DECODE : SSMP_OP_VERIFY;
      rc = t_->rows(I.self, named, int(entries), slots, op == wire::Op::decode ? 1 : k,
                    op == wire::Op::verify ? arm : 0, rows_io_.data(), err);
    } else if (prefill)
      rc = with_ple ? t_->prefill_ple(I.self, slots[0], rows, io.data(), ple.data(), err)
                    : t_->prefill(I.self, slots[0], rows, io.data(), err);
    else if (op == wire::Op::decode)
      rc = with_ple ? t_->decode_ple(I.self, int(entries), slots, io.data(), ple.data(), err)
                    : t_->decode(I.self, int(entries), slots, io.data(), err);
    else
      rc = with_ple ? t_->verify_ple(I.self, int(entries), slots, k, arm, io.data(), ple.data(), err)
                    : t_->verify(I.self, int(entries), slots, k, arm, io.data(), err);
    json r = checked(rc, *err, call);
    if (r.at("status") == SSMP_OK)
      for (const auto& [p, bytes] : outs) out->push_back({p, bytes});
    return r;
  }

  // The ssmp_state an export fills, its buffers fenced (fenced_) and its tables in ex_: valid
  // until the next call.
  // fresh: the first buffers of the call (fenced_.begin()); else taken after those of the call so far
  ssmp_state prepare_export(const PoolOf& P, bool fresh = true) {
    const size_t n = P.layers.size();
    const int h_room = P.pool.max_capacity(), conv_room = P.pool.conv_capacity;
    if (fresh) fenced_.begin();
    // the tables handed to the plug-in, reused across calls (cleared, their room kept)
    std::vector<ssmp_layer_state>& ls = ex_.ls;
    std::vector<ssmp_ple_state>& ps = ex_.ps;
    ls.assign(n, ssmp_layer_state{});
    ps.assign(n, ssmp_ple_state{});
    ex_.h_inter.resize(std::max(ex_.h_inter.size(), n));
    ex_.conv_inter.resize(std::max(ex_.conv_inter.size(), n));
    ex_.snaps.resize(std::max(ex_.snaps.size(), n));
    auto& h_inter = ex_.h_inter;
    auto& conv_inter = ex_.conv_inter;
    auto& snaps = ex_.snaps;
    for (size_t l = 0; l < n; ++l) {
      h_inter[l].clear();
      conv_inter[l].clear();
      snaps[l].clear();
    }
    const bool with_ple = hosts_ple(P) && (t_->flags & SSMP_PLE);
    int layer = -1;  // the layer whose buffers are handed out, for their names
    auto fl = [&](size_t elems, const char* field, int index = -1) {
      return reinterpret_cast<float*>(fenced_.take(elems * sizeof(float), {"export_state's", -1, layer, field, index}));
    };
    for (size_t l = 0; l < n; ++l) {
      const LayerSpec& s = P.layers[l];
      layer = int(l);
      const size_t h = size_t(s.h_elems()), conv = size_t(s.conv_elems());
      ssmp_layer_state& o = ls[l];
      o.h = fl(h, "h");
      o.conv = fl(conv, "conv");
      o.h_checkpoint = fl(h, "h_checkpoint");
      o.conv_checkpoint = fl(conv, "conv_checkpoint");
      for (int t = 0; t < h_room; ++t) h_inter[l].push_back(fl(h, "h_intermediate", t));
      for (int t = 0; t < conv_room; ++t) conv_inter[l].push_back(fl(conv, "conv_intermediate", t));
      o.h_intermediates = h_inter[l].data();
      o.conv_intermediates = conv_inter[l].data();
      o.h_intermediate_room = h_room;
      o.conv_intermediate_room = conv_room;
      if (with_ple && s.ple.hosted()) {
        const size_t hist = size_t(s.ple.history_len()), pc = size_t(s.ple.conv_rows()) * size_t(s.ple.channels);
        ps[l].live = {fl(hist, "PLE history"), fl(pc, "PLE conv")};
        ps[l].checkpoint = {fl(hist, "PLE checkpoint history"), fl(pc, "PLE checkpoint conv")};
        for (int t = 0; t < h_room + 1; ++t)
          snaps[l].push_back({fl(hist, "PLE snapshot history"), fl(pc, "PLE snapshot conv")});
        ps[l].snapshots = snaps[l].data();
        ps[l].snapshot_room = h_room + 1;
      }
    }
    int64_t stage = 0;
    for (const LayerSpec& s : P.layers) stage = std::max(stage, s.h_elems());
    ssmp_state st{};
    st.struct_size = sizeof st;
    st.n_layers = int(n);
    st.layers = ls.data();
    layer = -1;
    st.h_prefill_stage = P.pool.h_mode == HMode::f16_pool ? fl(size_t(stage), "h_prefill_stage") : nullptr;
    st.stage_elems = P.pool.h_mode == HMode::f16_pool ? stage : 0;
    st.ple = with_ple ? ps.data() : nullptr;
    return st;
  }

  StateLayout layout() const {
    return {(t_->flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1) ? ConvWindow::d_conv_minus_1 : ConvWindow::d_conv,
            (t_->flags & SSMP_H_VD_KD) ? HLayout::vd_kd : HLayout::kd_vd};
  }

  // ssmp_plugin.field_digests: the present fields as [name, layer, index, is_f16, digest] and the
  // rest digest, in JSON (a few dozen numbers; hosted_plugin.cpp matches them to its fields by name)
  json field_digests(Inst& I, int slot, ssmp_error* err) {
    ssmp_state st = prepare_export(I.pool);
    fields_.build(I.pool.layers, st, layout());
    digests_.assign(size_t(fields_.size()) + 1, 0);
    const int rc = t_->field_digests(I.self, slot, fields_.size(), fields_.data(), digests_.data(), err);
    json r = checked(rc, *err, "field_digests");
    if (r.at("status") != SSMP_OK) return r;
    json present = json::array();
    for (size_t i = 0; i < size_t(fields_.size()); ++i) {
      const ssmp_field& f = fields_[i];
      if (f.present) present.push_back({f.name, f.layer, f.index, f.is_f16 != 0, digests_[i]});
    }
    r["fields"] = std::move(present);
    r["rest"] = digests_.back();
    return r;
  }

  // export_fields of the fields the request lists ([name, layer, index] each): the plug-in exports
  // as it does for export_state (by name or positionally, in this process), and the reply carries
  // [present, is_f16] per listed field and the arrays of the present ones, in the listed order.
  json export_fields(Inst& I, int slot, const json& want, std::vector<wire::Arena::Piece>* out, ssmp_error* err) {
    ssmp_state st = prepare_export(I.pool);
    fields_.build(I.pool.layers, st, layout());
    std::map<std::tuple<std::string, int, int>, size_t> by_name;
    for (size_t i = 0; i < size_t(fields_.size()); ++i)
      by_name[{fields_[i].name, fields_[i].layer, fields_[i].index}] = i;
    subset_.clear();
    for (const json& w : want) {
      const auto it = by_name.find({w.at(0).get<std::string>(), w.at(1).get<int>(), w.at(2).get<int>()});
      if (it == by_name.end()) throw std::runtime_error("export_fields: no field " + w.dump() + " in this pool");
      subset_.push_back(fields_[it->second]);
    }
    int last_k = 0;
    json r;
    if (t_->flags & SSMP_BY_NAME) {  // only the fields asked for
      r = checked(t_->export_fields(I.self, slot, int(subset_.size()), subset_.data(), &last_k, err), *err,
                  "export_fields");
      if (r.at("status") != SSMP_OK) return r;
    } else {  // a whole export, and the fields asked for out of it
      r = checked(t_->export_state(I.self, slot, &st, err), *err, "export_state");
      if (r.at("status") != SSMP_OK) return r;
      last_k = st.last_verify_k;
      fields_.mark(st);
      for (ssmp_field& f : subset_) f = fields_[by_name.at({f.name, f.layer, f.index})];
    }
    json answers = json::array();
    for (const ssmp_field& f : subset_) {
      answers.push_back({f.present != 0, f.is_f16 != 0});
      if (!f.present) continue;
      int64_t elems = 1;
      for (int d = 0; d < f.rank; ++d) elems *= f.dims[d];
      out->push_back({f.data, uint64_t(elems) * (f.is_f16 ? 2 : 4)});
    }
    r["last_verify_k"] = last_k;
    r["fields"] = std::move(answers);
    return r;
  }

  // Exports `slot` into fenced buffers (prepare_export(fresh)) and pushes its arrays onto *out in
  // the order of export_state's reply; the call's status and, when it succeeded, *head.
  json export_slot(Inst& I, int slot, std::vector<wire::Arena::Piece>* out, ssmp_error* err, wire::ExportHead* head,
                   bool fresh) {
    const PoolOf& P = I.pool;
    const size_t n = P.layers.size();
    ssmp_state st = prepare_export(P, fresh);
    std::vector<ssmp_layer_state>& ls = ex_.ls;
    std::vector<ssmp_ple_state>& ps = ex_.ps;
    const bool with_ple = st.ple != nullptr;  // as prepare_export decided
    json r;
    if (t_->flags & SSMP_BY_NAME) {  // the fields of the same buffers, read back into st (plugin/named_abi.h)
      fields_.build(P.layers, st, layout());
      int last_k = 0;
      const int rc = t_->export_fields(I.self, slot, fields_.size(), fields_.data(), &last_k, err);
      r = checked(rc, *err, "export_fields");
      if (r.at("status") != SSMP_OK) return r;
      fields_.apply(st, last_k, "export_fields(slot " + std::to_string(slot) + ")");
    } else {
      const int rc = t_->export_state(I.self, slot, &st, err);
      r = checked(rc, *err, "export_state");
      if (r.at("status") != SSMP_OK) return r;
    }
    // the fields it has, arrays in the order hosted_plugin.cpp reads them
    auto limit = [](int v, int room, const std::string& what) {
      if (v < 0 || v > room)
        throw std::runtime_error("export_state: " + what + " " + std::to_string(v) + " (room for " + std::to_string(room) + ")");
    };
    wire::ExportHead& h = *head;
    h.layers.assign(n, wire::ExportedLayer{});
    for (size_t l = 0; l < n; ++l) {
      const LayerSpec& s = P.layers[l];
      const ssmp_layer_state& o = ls[l];
      const std::string at = "layer " + std::to_string(l) + " ";
      limit(o.n_h_intermediates, o.h_intermediate_room, at + "n_h_intermediates");
      limit(o.n_conv_intermediates, o.conv_intermediate_room, at + "n_conv_intermediates");
      const size_t hl = size_t(s.h_elems());
      const size_t conv = size_t(s.conv_dim()) * size_t(s.d_conv - ((t_->flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1) ? 1 : 0));
      auto hb = [&](bool f16) { return hl * (f16 ? 2 : 4); };
      wire::ExportedLayer& e = h.layers[l];
      e.h_is_f16 = o.h_is_f16 != 0;
      e.has_h_checkpoint = o.has_h_checkpoint != 0;
      e.h_checkpoint_is_f16 = o.h_checkpoint_is_f16 != 0;
      e.has_conv_checkpoint = o.has_conv_checkpoint != 0;
      e.n_h_intermediates = o.n_h_intermediates;
      e.n_conv_intermediates = o.n_conv_intermediates;
      e.h_intermediates_are_f16 = o.h_intermediates_are_f16 != 0;
      out->push_back({o.h, hb(o.h_is_f16)});
      out->push_back({o.conv, conv * 4});
      if (o.has_h_checkpoint) out->push_back({o.h_checkpoint, hb(o.h_checkpoint_is_f16)});
      if (o.has_conv_checkpoint) out->push_back({o.conv_checkpoint, conv * 4});
      for (int t = 0; t < o.n_h_intermediates; ++t) out->push_back({o.h_intermediates[t], hb(o.h_intermediates_are_f16)});
      for (int t = 0; t < o.n_conv_intermediates; ++t) out->push_back({o.conv_intermediates[t], conv * 4});
      if (with_ple && s.ple.hosted()) {
        const ssmp_ple_state& p = ps[l];
        limit(p.n_snapshots, p.snapshot_room, at + "PLE n_snapshots");
        e.has_ple = true;
        e.ple_has_live = p.has_live != 0;
        e.ple_has_checkpoint = p.has_checkpoint != 0;
        e.ple_n_snapshots = p.n_snapshots;
        const size_t hist = size_t(s.ple.history_len()) * 4, pc = size_t(s.ple.conv_rows()) * size_t(s.ple.channels) * 4;
        auto carry = [&](const ssmp_ple_carry& c) {
          out->push_back({c.history, hist});
          out->push_back({c.conv, pc});
        };
        if (p.has_live) carry(p.live);
        if (p.has_checkpoint) carry(p.checkpoint);
        for (int t = 0; t < p.n_snapshots; ++t) carry(p.snapshots[t]);
      }
    }
    h.last_verify_k = st.last_verify_k;
    h.has_prefill_stage = st.has_prefill_stage != 0 && st.h_prefill_stage;
    if (h.has_prefill_stage) out->push_back({st.h_prefill_stage, size_t(st.stage_elems) * 4});
    return r;
  }

  json export_state(Inst& I, int slot, std::vector<wire::Arena::Piece>* out, ssmp_error* err) {
    wire::ExportHead h;
    json r = export_slot(I, slot, out, err, &h, /*fresh=*/true);
    if (r.at("status") == SSMP_OK) r.update(wire::export_json(h));
    return r;
  }

  const ssmp_plugin* t_;
  int channel_;
  wire::Arena arena_;
  wire::Bell bell_;
  std::map<int64_t, Inst> insts_;
  int64_t next_id_ = 1;
  FencedSet fenced_;
  // reused across calls, so that a call allocates nothing once they have their room
  std::vector<wire::Arena::Piece> out_;
  std::vector<ssmp_layer_io> io_;
  std::vector<ssmp_ple_io> ple_io_;
  RowsIo rows_io_;       // SSMP_BY_NAME
  ExportFields fields_;  // SSMP_BY_NAME, and field_digests
  std::vector<uint64_t> digests_;   // field_digests' answers
  std::vector<ssmp_field> subset_;  // export_fields: the fields asked for
  std::vector<std::pair<const char*, size_t>> outs_;
  struct ExportTables {
    std::vector<ssmp_layer_state> ls;
    std::vector<std::vector<void*>> h_inter;
    std::vector<std::vector<float*>> conv_inter;
    std::vector<ssmp_ple_state> ps;
    std::vector<std::vector<ssmp_ple_carry>> snaps;
  } ex_;
  wire::Compact compact_reply_;
  std::vector<int32_t> compact_reply_slots_;
};

// The channel and arena descriptors, and the parent-death request; false when not started by ssmcheck.
bool adopt_parent() {
  const char* fds = std::getenv("SSMCHECK_HOST_FDS");
  const char* parent = std::getenv("SSMCHECK_HOST_PARENT");
  if (!fds || std::strcmp(fds, "3,4") != 0 || !parent) return false;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return ::getppid() == pid_t(std::atol(parent));  // the parent may have ended before the request
}

}  // namespace

int serve_plugin(const std::string& path) {
  if (!adopt_parent()) {
    std::fprintf(stderr, "ssmcheck-plugin-host: not started by ssmcheck (SSMCHECK_HOST_FDS, SSMCHECK_HOST_PARENT)\n");
    return 2;
  }
  install_fatal_handlers();
  const int channel = 3;
  wire::Arena arena(4);
  const ssmp_plugin* t = nullptr;
  std::string load_error;
  try {
    t = load_plugin_in_process(path).table;
  } catch (const std::exception& e) {
    load_error = e.what();
  }
  std::snprintf(g_call, sizeof g_call, "%s", "(between calls)");
  try {
    if (!t) {  // the hello is answered with why, then the host ends
      wire::Frame f;
      if (wire::read_frame(channel, &f))
        wire::write_frame(channel, {{"status", SSMP_ERROR}, {"message", load_error}}, {}, arena.size());
      return 2;
    }
    const char* bell = std::getenv("SSMCHECK_HOST_BELL");
    Server(t, channel, std::move(arena), bell && std::strcmp(bell, "5") == 0 ? wire::Bell(5) : wire::Bell()).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssmcheck-plugin-host: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace ssm::plugin
