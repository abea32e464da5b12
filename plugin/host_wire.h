// The wire between ssmcheck and the host process that runs a system under test (a C plug-in in
// ssmcheck-plugin-host, a Python class in python/ssmcheck/host.py): control messages on a stream
// socket, arrays in one shared file both processes map (the arena), written in place, never
// serialised. Counterparts: plugin/host_process.h (ssmcheck's side), plugin/host_server.h (the C
// host), python/ssmcheck/bridge.py (the Python host); docs/plugins.md, "The host process".
//
// A C host also takes a doorbell (Bell, below): after the hello, frames go into the arena and
// each side rings a shared word instead of writing the socket, and waits by watching the peer's
// word for a while before it sleeps on it (futex), so a call costs no system call while the peer
// answers within the spin window.
//
// A frame, either direction (little-endian): u64 json_bytes, u32 n_arrays, u32 form, u64
// arena_bytes, the body (json_bytes bytes), then n_arrays x {u64 offset, u64 bytes} into the arena.
// form 0: the body is JSON text. form 1 (through the doorbell only, so only between ssmcheck and a
// C host): the body is a Compact record and its slots, for the calls of every op (Op below) and
// their plain replies; a reply with a kind or message, and every other call, stays JSON. arena_bytes is the
// arena's size as the writer left it: a writer that needs more room grows the file, and the
// reader maps it again before reading. Requests are {"call": NAME, "instance": ID, ...}, replies
// {"status": 0|1|2, "kind", "message", ...}. Arrays start at 64-byte aligned offsets; a reply's
// arrays may overwrite the request's (each side copies what it keeps).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ssm::plugin::wire {

// The channel failed (the peer is gone, or sent something that is not a frame).
struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Frames are bounded so that a confused peer cannot make either side allocate without limit.
constexpr uint64_t kMaxJson = uint64_t(1) << 26;     // 64 MiB of JSON
constexpr uint64_t kMaxArena = uint64_t(1) << 36;    // 64 GiB of arrays
constexpr uint32_t kMaxArrays = 1u << 22;

// The shared file: created by ssmcheck (memfd), inherited by the host as a descriptor.
class Arena {
 public:
  Arena() = default;
  explicit Arena(int fd);  // adopts fd (the host's side)
  static Arena create();   // a new, empty memfd (ssmcheck's side); throws WireError
  ~Arena();
  Arena(Arena&& o) noexcept;
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  char* base() { return base_; }
  // Maps at least `bytes` (the peer grew the file to that); throws WireError.
  void follow(uint64_t bytes);
  // Places the arrays one after another from offset 0 (64-byte aligned), growing the file when
  // they do not fit, and copies them in; returns where each went.
  struct Piece {
    const void* data;
    uint64_t bytes;
  };
  std::vector<std::pair<uint64_t, uint64_t>> put(const std::vector<Piece>& pieces);
  // The same into *at (reused: no allocation once it has the room), and `extra` bytes more of room
  // after the last array (64-byte aligned); returns where that room starts.
  uint64_t put(const std::vector<Piece>& pieces, std::vector<std::pair<uint64_t, uint64_t>>* at, uint64_t extra);
  // Copies `bytes` to `offset`, growing the file when they do not fit.
  void place(uint64_t offset, const void* data, uint64_t bytes);
  // A received array, checked to lie inside the arena; throws WireError naming `what`.
  const char* at(uint64_t offset, uint64_t bytes, const std::string& what) const;

 private:
  void map(uint64_t bytes);
  int fd_ = -1;
  char* base_ = nullptr;
  uint64_t size_ = 0;
};

// The calls sent as Compact records (form 1), and the fields they use.
enum class Op : uint32_t {
  prefill = 1,       // slot, rows; arrays: the inputs
  decode,            // slots
  verify,            // slots, rows (k), arg (SSMP_ARM_*)
  checkpoint,        // slot, arg (async)
  commit,            // slot, n, k
  rollback,          // slot, n, arg (and_checkpoint)
  to_f16,            // slot
  snapshot_save,     // slot, arg (snap)
  snapshot_restore,  // slot, arg (snap)
  alloc,             // arg (min_capacity); the reply's slot
  release,           // slot
};
constexpr uint32_t kLastOp = uint32_t(Op::release);
const char* op_name(Op op);
struct Compact {
  uint32_t op = 0;     // Op; a reply repeats its call's
  int32_t status =
      0;  // a reply's SSMP_OK, SSMP_REFUSED or SSMP_ERROR (without a message); a call's flags (kExportAfter)
  int64_t instance = 0;
  int32_t slot = -1, rows = 0, n = 0, k = 0, arg = 0;
  uint32_t n_slots = 0;  // then n_slots x i32
};
static_assert(sizeof(Compact) == 40, "the compact record is 40 bytes");
// A call's flag: when the op succeeds, the host exports every slot the instance holds (allocated
// and not released) and sends the exports with the reply, so that ssmcheck's export of each after
// the op costs no round trip (docs/plugins.md, "The host process"). The reply's slots are then
// the exports' heads as words (ExportHead, below), its arrays the op's outputs and then each
// export's arrays in the order of export_state's reply. An export that fails makes the call fail,
// its message naming export_state; while the host exports, Bell::exporting names the slot, so
// that a crash or hang there is reported as one of export_state.
constexpr int32_t kExportAfter = 1;
// The same call as JSON, as a host without Compact records takes it (the Python host):
// {"call": "commit", "instance": 1, "slot": 0, "n": 2, "k": 3}; slots: c.n_slots of them.
nlohmann::json json_of(const Compact& c, const int32_t* slots);
constexpr uint32_t kMaxSlots = 1u << 20;

// What an export holds beyond its arrays: export_state's reply without them. In JSON (every host:
// {"last_verify_k", "has_prefill_stage", "layers": [{"h_is_f16", "has_h_checkpoint",
// "h_checkpoint_is_f16", "has_conv_checkpoint", "n_h_intermediates", "n_conv_intermediates",
// "h_intermediates_are_f16", ["ple": {"has_live", "has_checkpoint", "n_snapshots"}]}, ...]}) or as
// words (the exports sent with a kExportAfter call's reply: slot, last_verify_k,
// has_prefill_stage, layers, then per layer flags (ExportedLayer::Bits), n_h_intermediates,
// n_conv_intermediates, ple_n_snapshots). Its arrays, per layer: h, conv, [h_checkpoint],
// [conv_checkpoint], the h intermediates, the conv intermediates, [the PLE carries: live,
// checkpoint, snapshots, each history then conv]; then [the prefill stage].
struct ExportedLayer {
  bool h_is_f16 = false, has_h_checkpoint = false, h_checkpoint_is_f16 = false, has_conv_checkpoint = false,
       h_intermediates_are_f16 = false;
  int n_h_intermediates = 0, n_conv_intermediates = 0;
  bool has_ple = false, ple_has_live = false, ple_has_checkpoint = false;  // has_ple: a layer hosting a carry, exported
  int ple_n_snapshots = 0;
  enum Bits : int32_t {
    kHIsF16 = 1,
    kHasHCheckpoint = 2,
    kHCheckpointIsF16 = 4,
    kHasConvCheckpoint = 8,
    kHIntermediatesAreF16 = 16,
    kHasPle = 32,
    kPleHasLive = 64,
    kPleHasCheckpoint = 128
  };
};
struct ExportHead {
  int slot = -1;  // as words only
  int last_verify_k = 0;
  bool has_prefill_stage = false;
  std::vector<ExportedLayer> layers;
};
nlohmann::json export_json(const ExportHead& h);
// Throws std::runtime_error naming what is missing or of the wrong kind ("export_state: ...").
ExportHead export_head(const nlohmann::json& reply, size_t layers);
void append_words(const ExportHead& h, std::vector<int32_t>* words);
// The head at words[*at..], *at moved past it; throws WireError when the words end first.
ExportHead read_words(const int32_t* words, size_t n, size_t* at);

struct Frame {
  bool compact = false;  // form 1: `c` and `slots` hold it, `msg` is not touched
  Compact c;
  std::vector<int32_t> slots;
  nlohmann::json msg;
  std::vector<std::pair<uint64_t, uint64_t>> arrays;  // offset, bytes
  uint64_t arena_bytes = 0;
};

// Waits until fd can be read (or throws): ssmcheck's side puts its timeout and the host's
// liveness here; an empty one blocks.
using WaitReadable = std::function<void(int fd)>;

void write_frame(int fd, const nlohmann::json& msg, const std::vector<std::pair<uint64_t, uint64_t>>& arrays,
                 uint64_t arena_bytes);
// false: the peer closed the channel before a frame began. Throws WireError on a broken frame.
bool read_frame(int fd, Frame* f, const WaitReadable& wait = {});

// A frame's bytes, and the frame in bytes (throws WireError naming what is malformed).
std::string encode_frame(const nlohmann::json& msg, const std::vector<std::pair<uint64_t, uint64_t>>& arrays,
                         uint64_t arena_bytes);
void decode_frame(const char* p, uint64_t n, Frame* f);

// Where the doorbell page keeps Bell::exporting's word (bridge.py restates it; its tests check).
constexpr uint64_t kBellExportingOffset = 64;

// The doorbell: a shared page with, per direction (0: to the host, 1: to ssmcheck), the number of
// frames sent, whether the receiver sleeps, and where the last frame lies in the arena.
class Bell {
 public:
  static constexpr int kToHost = 0, kToClient = 1;
  Bell() = default;
  explicit Bell(int fd);  // adopts and maps fd (the host's side)
  static Bell create();   // a new page (ssmcheck's side); throws WireError
  ~Bell();
  Bell(Bell&& o) noexcept;
  Bell& operator=(Bell&& o) noexcept;
  Bell(const Bell&) = delete;
  Bell& operator=(const Bell&) = delete;
  int fd() const { return fd_; }
  bool on() const { return block_ != nullptr; }

  // Places the arrays and the frame in the arena and rings direction d.
  void send(int d, Arena& arena, const nlohmann::json& msg, const std::vector<Arena::Piece>& arrays);
  // The same with a Compact record (form 1) and its n_slots slots as the body.
  void send(int d, Arena& arena, const Compact& c, const int32_t* slots, const std::vector<Arena::Piece>& arrays);
  // Waits for the next frame of direction d (spinning first, then sleeping); every ~100 ms of
  // sleep calls `tick`, which may throw to give up. The frame's arrays lie in the arena.
  void receive(int d, Arena& arena, Frame* f, const std::function<void()>& tick);
  // The slot a host is exporting for a kExportAfter call (the host sets it, -1 after), which
  // ssmcheck reads when the host dies or hangs during the call. A host that does not speak the
  // doorbell (the Python host) writes the word itself: slot + 1 as a native int32 at byte
  // kBellExportingOffset of the page, 0 when it is not exporting.
  void set_exporting(int slot);
  int exporting() const;

 private:
  struct Block;
  int fd_ = -1;
  Block* block_ = nullptr;
  void ring(int d, Arena& arena, uint32_t form, const void* body, uint64_t body_bytes, const void* slots,
            uint64_t slot_bytes, const std::vector<Arena::Piece>& arrays);
  uint32_t sent_[2] = {0, 0}, seen_[2] = {0, 0};
  std::vector<std::pair<uint64_t, uint64_t>> at_;  // where the last frame's arrays went (reused)
};

// JSON text that is always valid UTF-8 (invalid bytes replaced), for messages from the other side.
std::string dump(const nlohmann::json& j);

}  // namespace ssm::plugin::wire
