// The wire between ssmcheck and a host process (see host_wire.h).
#include "plugin/host_wire.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin::wire {

namespace {

std::string err_text() { return std::strerror(errno); }

void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that is gone is an error here, never a SIGPIPE
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw WireError("the host channel is closed (writing failed: " + err_text() + ")");
    c += w;
    n -= size_t(w);
  }
}

// false when the channel closed before the first byte (and `eof_ok`); throws on a short read.
bool read_all(int fd, void* p, size_t n, const WaitReadable& wait, bool eof_ok) {
  char* c = static_cast<char*>(p);
  const size_t want = n;
  while (n > 0) {
    if (wait) wait(fd);
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (eof_ok && n == want) return false;
      throw WireError("the host channel closed in the middle of a frame");
    }
    if (r < 0) throw WireError("reading the host channel failed: " + err_text());
    c += r;
    n -= size_t(r);
  }
  return true;
}

struct Header {  // (offsetof arena_bytes is part of the wire: Bell::send writes it in place)
  uint64_t json_bytes;
  uint32_t n_arrays;
  uint32_t form;  // 0: JSON text, 1: a Compact record
  uint64_t arena_bytes;
};
static_assert(sizeof(Header) == 24, "the frame header is 24 bytes");

constexpr uint64_t kAlign = 64;
uint64_t aligned(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

Arena::Arena(int fd) : fd_(fd) {}

Arena Arena::create() {
  const int fd = ::memfd_create("ssmcheck-arena", MFD_CLOEXEC);
  if (fd < 0) throw WireError("cannot create the shared arena (memfd_create): " + err_text());
  return Arena(fd);
}

Arena::~Arena() {
  if (base_) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

Arena::Arena(Arena&& o) noexcept : fd_(o.fd_), base_(o.base_), size_(o.size_) {
  o.fd_ = -1;
  o.base_ = nullptr;
  o.size_ = 0;
}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    this->~Arena();
    new (this) Arena(std::move(o));
  }
  return *this;
}

void Arena::map(uint64_t bytes) {
  if (base_) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) throw WireError("cannot map the shared arena (" + std::to_string(bytes) + " bytes): " + err_text());
  base_ = static_cast<char*>(p);
  size_ = bytes;
}

void Arena::follow(uint64_t bytes) {
  if (bytes > kMaxArena)
    throw WireError("the peer announced an arena of " + std::to_string(bytes) +
                    " bytes, more than the wire's bound of " + std::to_string(kMaxArena) +
                    " (plugin/host_wire.h, kMaxArena)");
  if (bytes <= size_) return;
  // a mapping past the file's end faults (SIGBUS) where it is read: the size announced must be there
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw WireError("cannot stat the shared arena: " + err_text());
  if (uint64_t(st.st_size) < bytes)
    throw WireError("the peer announced an arena of " + std::to_string(bytes) + " bytes, but the shared file holds " +
                    std::to_string(st.st_size));
  map(bytes);
}

std::vector<std::pair<uint64_t, uint64_t>> Arena::put(const std::vector<Piece>& pieces) {
  std::vector<std::pair<uint64_t, uint64_t>> at;
  put(pieces, &at, 0);
  return at;
}

uint64_t Arena::put(const std::vector<Piece>& pieces, std::vector<std::pair<uint64_t, uint64_t>>* at_out,
                    uint64_t extra) {
  auto& at = *at_out;
  at.clear();
  uint64_t end = 0;
  for (const Piece& p : pieces) {
    at.emplace_back(end, p.bytes);
    end = aligned(end + p.bytes);
  }
  const uint64_t room = end;
  end += extra;
  if (end > kMaxArena) throw WireError("arrays of " + std::to_string(end) + " bytes do not fit the shared arena");
  if (end > size_) {
    const uint64_t grown = std::max<uint64_t>(end, size_ + size_ / 2);
    if (::ftruncate(fd_, off_t(grown)) != 0)
      throw WireError("cannot grow the shared arena to " + std::to_string(grown) + " bytes: " + err_text());
    map(grown);
  }
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].bytes) std::memcpy(base_ + at[i].first, pieces[i].data, pieces[i].bytes);
  return room;
}

void Arena::place(uint64_t offset, const void* data, uint64_t bytes) {
  const uint64_t end = offset + bytes;
  if (end > kMaxArena) throw WireError("a frame of " + std::to_string(end) + " bytes does not fit the shared arena");
  if (end > size_) {
    const uint64_t grown = std::max<uint64_t>(end, size_ + size_ / 2);
    if (::ftruncate(fd_, off_t(grown)) != 0)
      throw WireError("cannot grow the shared arena to " + std::to_string(grown) + " bytes: " + err_text());
    map(grown);
  }
  std::memcpy(base_ + offset, data, bytes);
}

const char* Arena::at(uint64_t offset, uint64_t bytes, const std::string& what) const {
  if (offset > size_ || bytes > size_ - offset)
    throw WireError(what + ": " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                    " lie outside the shared arena (" + std::to_string(size_) + " bytes)");
  return base_ + offset;
}

const char* op_name(Op op) {
  static const char* const names[] = {"?",      "prefill",  "decode", "verify",        "checkpoint",
                                      "commit", "rollback", "to_f16", "snapshot_save", "snapshot_restore",
                                      "alloc",  "release"};
  return uint32_t(op) <= kLastOp ? names[uint32_t(op)] : "?";
}

nlohmann::json json_of(const Compact& c, const int32_t* slots) {
  const Op op = Op(c.op);
  nlohmann::json j = {{"call", op_name(op)}, {"instance", c.instance}};
  switch (op) {
    case Op::decode: j["slots"] = std::vector<int>(slots, slots + c.n_slots); break;
    case Op::verify:
      j["slots"] = std::vector<int>(slots, slots + c.n_slots);
      j["k"] = c.rows;
      j["arm"] = c.arg == SSMP_ARM_WY ? "wy" : "exact";
      break;
    case Op::alloc: j["min_capacity"] = c.arg; break;
    default: j["slot"] = c.slot; break;
  }
  if (op == Op::prefill) j["rows"] = c.rows;
  if (op == Op::checkpoint) j["async"] = c.arg != 0;
  if (op == Op::commit || op == Op::rollback) j["n"] = c.n;
  if (op == Op::commit) j["k"] = c.k;
  if (op == Op::rollback) j["and_checkpoint"] = c.arg != 0;
  if (op == Op::snapshot_save || op == Op::snapshot_restore) j["snap"] = c.arg;
  return j;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string encode_frame(const nlohmann::json& msg, const std::vector<std::pair<uint64_t, uint64_t>>& arrays,
                         uint64_t arena_bytes) {
  const std::string text = dump(msg);
  Header h{text.size(), uint32_t(arrays.size()), 0, arena_bytes};
  std::string buf(reinterpret_cast<const char*>(&h), sizeof h);
  buf += text;
  for (const auto& [off, n] : arrays) {
    buf.append(reinterpret_cast<const char*>(&off), sizeof off);
    buf.append(reinterpret_cast<const char*>(&n), sizeof n);
  }
  return buf;
}

void write_frame(int fd, const nlohmann::json& msg, const std::vector<std::pair<uint64_t, uint64_t>>& arrays,
                 uint64_t arena_bytes) {
  const std::string buf = encode_frame(msg, arrays, arena_bytes);
  write_all(fd, buf.data(), buf.size());
}

namespace {
void check_header(const Header& h) {
  if (h.json_bytes > kMaxJson || h.n_arrays > kMaxArrays || h.form > 1)
    throw WireError("the peer sent a malformed frame header (" + std::to_string(h.json_bytes) + " bytes of JSON, " +
                    std::to_string(h.n_arrays) + " arrays, form " + std::to_string(h.form) + ")");
}

// The JSON text and the array table after a header.
void decode_body(const Header& h, const char* body, Frame* f) {
  f->arrays.assign(h.n_arrays, {0, 0});
  for (uint32_t i = 0; i < h.n_arrays; ++i) {
    uint64_t pair[2];
    std::memcpy(pair, body + h.json_bytes + uint64_t(i) * 16, sizeof pair);
    f->arrays[i] = {pair[0], pair[1]};
  }
  f->arena_bytes = h.arena_bytes;
  f->compact = h.form == 1;
  if (f->compact) {
    if (h.json_bytes < sizeof(Compact))
      throw WireError("a compact record of " + std::to_string(h.json_bytes) + " bytes");
    std::memcpy(&f->c, body, sizeof(Compact));
    if (f->c.n_slots > kMaxSlots || h.json_bytes != sizeof(Compact) + uint64_t(f->c.n_slots) * 4 || f->c.op == 0 ||
        f->c.op > kLastOp)
      throw WireError("a malformed compact record (call " + std::to_string(f->c.op) + ", " +
                      std::to_string(f->c.n_slots) + " slots, " + std::to_string(h.json_bytes) + " bytes)");
    f->slots.resize(f->c.n_slots);
    if (f->c.n_slots) std::memcpy(f->slots.data(), body + sizeof(Compact), size_t(f->c.n_slots) * 4);
    return;
  }
  try {
    f->msg = nlohmann::json::parse(body, body + h.json_bytes);
  } catch (const std::exception& e) {
    throw WireError(std::string("the peer sent malformed JSON: ") + e.what());
  }
}
}  // namespace

void decode_frame(const char* p, uint64_t n, Frame* f) {
  Header h{};
  if (n < sizeof h) throw WireError("a frame of " + std::to_string(n) + " bytes");
  std::memcpy(&h, p, sizeof h);
  check_header(h);
  if (n != sizeof h + h.json_bytes + uint64_t(h.n_arrays) * 16)
    throw WireError("a frame of " + std::to_string(n) + " bytes does not match its header");
  decode_body(h, p + sizeof h, f);
}

bool read_frame(int fd, Frame* f, const WaitReadable& wait) {
  Header h{};
  if (!read_all(fd, &h, sizeof h, wait, true)) return false;
  check_header(h);
  // the JSON text and the array table in one read (a frame of many arrays is one system call)
  std::string body(h.json_bytes + uint64_t(h.n_arrays) * 16, '\0');
  read_all(fd, body.data(), body.size(), wait, false);
  decode_body(h, body.data(), f);
  return true;
}

// --- the doorbell ---------------------------------------------------------------------------------

struct Bell::Block {
  std::atomic<uint32_t> seq[2];
  std::atomic<uint32_t> asleep[2];
  uint64_t frame_offset[2], frame_bytes[2], arena_bytes[2];
  std::atomic<int32_t> exporting;  // the slot + 1 a host exports for a kExportAfter call, 0 otherwise
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the doorbell needs lock-free words");

namespace {
constexpr size_t kBellBytes = 4096;
// Spinning: the peer's answer to a call of a small model comes within tens of microseconds;
// past the spin the waiter sleeps on the word (futex), so a long call costs no CPU. With cores to
// spare the waiter watches busily (the peer runs on another core); on a machine of 2 or 3 cores,
// where the peer may need this one, it yields the core between looks after 10 us (measured: on
// 2 cores busy watching cost more than the socket it replaces; on the H200's 16 the doorbell
// took the hosted tiny campaign from 0.46 to 0.67 of in-process, docs/plugins.md).
const auto kSpinHot = std::chrono::microseconds(std::thread::hardware_concurrency() >= 4 ? 200 : 10);
constexpr auto kSpinYield = std::chrono::microseconds(200);  // then yielding the core between looks

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* t) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, t, nullptr, 0);
}
}  // namespace

Bell::Bell(int fd) : fd_(fd) {
  void* p = ::mmap(nullptr, kBellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) throw WireError("cannot map the doorbell: " + err_text());
  block_ = static_cast<Block*>(p);
}

Bell Bell::create() {
  static_assert(offsetof(Block, exporting) == kBellExportingOffset, "bridge.py writes the word at this offset");
  const int fd = ::memfd_create("ssmcheck-bell", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, kBellBytes) != 0) throw WireError("cannot create the doorbell: " + err_text());
  return Bell(fd);  // a new file reads as zeros: no frame sent, nobody asleep
}

Bell::~Bell() {
  if (block_) ::munmap(block_, kBellBytes);
  if (fd_ >= 0) ::close(fd_);
}

Bell::Bell(Bell&& o) noexcept : fd_(o.fd_), block_(o.block_) {
  std::memcpy(sent_, o.sent_, sizeof sent_);
  std::memcpy(seen_, o.seen_, sizeof seen_);
  o.fd_ = -1;
  o.block_ = nullptr;
}

Bell& Bell::operator=(Bell&& o) noexcept {
  if (this != &o) {
    this->~Bell();
    new (this) Bell(std::move(o));
  }
  return *this;
}

void Bell::send(int d, Arena& arena, const nlohmann::json& msg, const std::vector<Arena::Piece>& arrays) {
  const std::string text = dump(msg);
  ring(d, arena, 0, text.data(), text.size(), nullptr, 0, arrays);
}

void Bell::send(int d, Arena& arena, const Compact& c, const int32_t* slots, const std::vector<Arena::Piece>& arrays) {
  ring(d, arena, 1, &c, sizeof c, slots, uint64_t(c.n_slots) * 4, arrays);
}

// The arrays, then the frame right after them, written in place (the arena grown once for both).
void Bell::ring(int d, Arena& arena, uint32_t form, const void* body, uint64_t body_bytes, const void* slots,
                uint64_t slot_bytes, const std::vector<Arena::Piece>& arrays) {
  const uint64_t n_bytes = body_bytes + slot_bytes;
  const uint64_t frame_bytes = sizeof(Header) + n_bytes + uint64_t(arrays.size()) * 16;
  const uint64_t end = arena.put(arrays, &at_, frame_bytes);
  char* p = arena.base() + end;
  // the frame's arena size is the size after the frame is placed (put grew it for both)
  const Header h{n_bytes, uint32_t(arrays.size()), form, arena.size()};
  std::memcpy(p, &h, sizeof h);
  std::memcpy(p + sizeof h, body, body_bytes);
  if (slot_bytes) std::memcpy(p + sizeof h + body_bytes, slots, slot_bytes);
  char* table = p + sizeof h + n_bytes;
  for (size_t i = 0; i < at_.size(); ++i) {
    const uint64_t pair[2] = {at_[i].first, at_[i].second};
    std::memcpy(table + i * 16, pair, sizeof pair);
  }
  block_->frame_offset[d] = end;
  block_->frame_bytes[d] = frame_bytes;
  block_->arena_bytes[d] = arena.size();
  block_->seq[d].store(++sent_[d], std::memory_order_seq_cst);
  if (block_->asleep[d].load(std::memory_order_seq_cst)) futex(&block_->seq[d], FUTEX_WAKE, INT_MAX, nullptr);
}

void Bell::receive(int d, Arena& arena, Frame* f, const std::function<void()>& tick) {
  const uint32_t last = seen_[d];
  std::atomic<uint32_t>& word = block_->seq[d];
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; word.load(std::memory_order_acquire) == last; ++i) {
    if (i % 64 != 63) {  // the clock (tens of ns, more in a VM) is read at every 64th look only
      relax();
      continue;
    }
    const auto spent = std::chrono::steady_clock::now() - start;
    if (spent < kSpinHot) continue;
    if (spent < kSpinYield) {
      ::sched_yield();
      continue;
    }
    block_->asleep[d].store(1, std::memory_order_seq_cst);
    if (word.load(std::memory_order_seq_cst) == last) {
      const timespec t{0, 100 * 1000 * 1000};
      const long r = futex(&word, FUTEX_WAIT, last, &t);
      if (r != 0 && errno == ETIMEDOUT) {
        block_->asleep[d].store(0, std::memory_order_seq_cst);
        if (tick) tick();
        continue;
      }
    }
    block_->asleep[d].store(0, std::memory_order_seq_cst);
  }
  seen_[d] = word.load(std::memory_order_acquire);
  if (seen_[d] != last + 1) throw WireError("the doorbell skipped a frame");
  arena.follow(block_->arena_bytes[d]);
  decode_frame(arena.at(block_->frame_offset[d], block_->frame_bytes[d], "the frame"), block_->frame_bytes[d], f);
}

void Bell::set_exporting(int slot) {
  if (block_) block_->exporting.store(slot + 1, std::memory_order_seq_cst);
}

int Bell::exporting() const { return block_ ? block_->exporting.load(std::memory_order_seq_cst) - 1 : -1; }

// --- exports ---------------------------------------------------------------------------------------

nlohmann::json export_json(const ExportHead& h) {
  nlohmann::json layers = nlohmann::json::array();
  for (const ExportedLayer& o : h.layers) {
    nlohmann::json j = {{"h_is_f16", o.h_is_f16},
                        {"has_h_checkpoint", o.has_h_checkpoint},
                        {"h_checkpoint_is_f16", o.h_checkpoint_is_f16},
                        {"has_conv_checkpoint", o.has_conv_checkpoint},
                        {"n_h_intermediates", o.n_h_intermediates},
                        {"n_conv_intermediates", o.n_conv_intermediates},
                        {"h_intermediates_are_f16", o.h_intermediates_are_f16}};
    if (o.has_ple)
      j["ple"] = {
          {"has_live", o.ple_has_live}, {"has_checkpoint", o.ple_has_checkpoint}, {"n_snapshots", o.ple_n_snapshots}};
    layers.push_back(std::move(j));
  }
  return {
      {"last_verify_k", h.last_verify_k}, {"layers", std::move(layers)}, {"has_prefill_stage", h.has_prefill_stage}};
}

ExportHead export_head(const nlohmann::json& reply, size_t n_layers) {
  ExportHead h;
  try {
    const nlohmann::json& layers = reply.at("layers");
    if (!layers.is_array() || layers.size() != n_layers)
      throw std::runtime_error("'layers' must list " + std::to_string(n_layers) + " layers");
    h.last_verify_k = reply.value("last_verify_k", 0);
    h.has_prefill_stage = reply.value("has_prefill_stage", false);
    for (const nlohmann::json& j : layers) {
      ExportedLayer o;
      o.h_is_f16 = j.value("h_is_f16", false);
      o.has_h_checkpoint = j.value("has_h_checkpoint", false);
      o.h_checkpoint_is_f16 = j.value("h_checkpoint_is_f16", false);
      o.has_conv_checkpoint = j.value("has_conv_checkpoint", false);
      o.n_h_intermediates = j.value("n_h_intermediates", 0);
      o.n_conv_intermediates = j.value("n_conv_intermediates", 0);
      o.h_intermediates_are_f16 = j.value("h_intermediates_are_f16", false);
      const auto ple = j.find("ple");
      if ((o.has_ple = ple != j.end())) {
        o.ple_has_live = ple->value("has_live", false);
        o.ple_has_checkpoint = ple->value("has_checkpoint", false);
        o.ple_n_snapshots = ple->value("n_snapshots", 0);
      }
      h.layers.push_back(o);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("export_state: a malformed reply: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("export_state: ") + e.what());
  }
  return h;
}

void append_words(const ExportHead& h, std::vector<int32_t>* w) {
  w->insert(w->end(), {h.slot, h.last_verify_k, h.has_prefill_stage ? 1 : 0, int32_t(h.layers.size())});
  for (const ExportedLayer& o : h.layers) {
    using B = ExportedLayer;
    const int32_t bits = (o.h_is_f16 ? B::kHIsF16 : 0) | (o.has_h_checkpoint ? B::kHasHCheckpoint : 0) |
                         (o.h_checkpoint_is_f16 ? B::kHCheckpointIsF16 : 0) |
                         (o.has_conv_checkpoint ? B::kHasConvCheckpoint : 0) |
                         (o.h_intermediates_are_f16 ? B::kHIntermediatesAreF16 : 0) | (o.has_ple ? B::kHasPle : 0) |
                         (o.ple_has_live ? B::kPleHasLive : 0) | (o.ple_has_checkpoint ? B::kPleHasCheckpoint : 0);
    w->insert(w->end(), {bits, o.n_h_intermediates, o.n_conv_intermediates, o.ple_n_snapshots});
  }
}

ExportHead read_words(const int32_t* w, size_t n, size_t* at) {
  auto need = [&](size_t k) {
    if (n - *at < k) throw WireError("the exports sent with a reply end within a head");
  };
  need(4);
  ExportHead h;
  h.slot = w[*at];
  h.last_verify_k = w[*at + 1];
  h.has_prefill_stage = w[*at + 2] != 0;
  const int32_t layers = w[*at + 3];
  *at += 4;
  if (layers < 0 || size_t(layers) > (n - *at) / 4) throw WireError("the exports sent with a reply end within a head");
  for (int32_t l = 0; l < layers; ++l, *at += 4) {
    using B = ExportedLayer;
    const int32_t bits = w[*at];
    ExportedLayer o;
    o.h_is_f16 = bits & B::kHIsF16;
    o.has_h_checkpoint = bits & B::kHasHCheckpoint;
    o.h_checkpoint_is_f16 = bits & B::kHCheckpointIsF16;
    o.has_conv_checkpoint = bits & B::kHasConvCheckpoint;
    o.h_intermediates_are_f16 = bits & B::kHIntermediatesAreF16;
    o.has_ple = bits & B::kHasPle;
    o.ple_has_live = bits & B::kPleHasLive;
    o.ple_has_checkpoint = bits & B::kPleHasCheckpoint;
    o.n_h_intermediates = w[*at + 1];
    o.n_conv_intermediates = w[*at + 2];
    o.ple_n_snapshots = w[*at + 3];
    h.layers.push_back(o);
  }
  return h;
}

}  // namespace ssm::plugin::wire
