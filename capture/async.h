// Asynchronous capture (ssmc_set_async, ABI minor 5): a bounded staging arena handed out as a ring
// in op order, the device-to-host copies of an op on the library's side stream, and the background
// thread that writes queued ops. Knows nothing of the trace: capture.cpp records an op's calls with
// their bytes staged here and gives the writer a function that replays them into the trace.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ssmc_async {

// One pointer argument of a recorded call. Host bytes are copied at the call into the op's own
// buffer (at heap_off), device bytes at ssmc_end_op; both land at `pos` in the arena.
struct Staged {
  bool given = false;   // a non-null pointer was passed
  bool device = false;  // SSMC_DEVICE
  const void* src = nullptr;
  size_t heap_off = 0, bytes = 0;
  uint64_t pos = 0;
};

// One ABI call of an op, replayed by the writer with host pointers into the arena.
struct Call {
  // input, output: by name (ABI minor 6), the name in `text`, an input's dtype in i3
  enum Kind { inputs, ple_inputs, outputs, ple_outputs, input, output, refused, state_begin, state_tensor } kind;
  explicit Call(Kind k) : kind(k) {}
  int i0 = 0, i1 = 0, i2 = 0, i3 = 0;  // entry/seq, layer/slot, index/last_verify_k, dtype
  std::string text;                    // field, input or output name, or refusal kind
  std::vector<Staged> data;            // the call's pointers, in parameter order
  bool is_state() const { return kind == state_begin || kind == state_tensor; }
};

// A device range to copy into the arena when the op ends.
struct DeviceCopy {
  const void* src;
  uint64_t pos;
  size_t bytes;
};

struct QueuedOp {
  std::string text;
  int index = 0;  // the op's number in the trace as the engine saw it
  std::vector<Call> calls;
  bool states_dropped = false;
  uint64_t begin = 0, end = 0;  // its arena range, freed once written
  void* copied = nullptr;       // cudaEvent_t recorded after its device copies (null: none)
};

enum class Policy { block = 0, drop_states = 1 };

class Async {
 public:
  // `write` runs on the writer thread for each op in order and returns "" or the failure's message
  // (the op is then not in the trace).
  Async(size_t arena_bytes, Policy policy, std::function<std::string(const QueuedOp&, const char* arena)> write);
  ~Async();  // stops the thread; queued ops not written yet are dropped (as by a crash)
  Async(const Async&) = delete;
  Async& operator=(const Async&) = delete;

  Policy policy() const { return policy_; }
  size_t capacity() const { return cap_; }
  bool pinned() const { return pinned_; }
  char* at(uint64_t pos) const { return base_ + pos % cap_; }

  // Reserves n contiguous bytes (n <= capacity()) for an op at the ring's head. Blocks while the
  // ring is full; with may_drop returns false instead.
  bool reserve(size_t n, bool may_drop, uint64_t& pos);
  // Device staging (ssmc_set_device_staging): a ring of `bytes` on the current CUDA device. Throws
  // std::runtime_error when it cannot be allocated or the build has no CUDA (nothing changes then).
  void set_device_staging(size_t bytes);
  size_t device_staging() const { return dev_cap_; }
  int64_t device_staged() const { return dev_staged_; }  // ops whose arrays went through the ring
  // Copies the op's device ranges (in ascending `pos`, inside one reserved range) on the side stream
  // after an event of `stream` and makes `stream` wait for them on the device (never on the host).
  // With device staging and room for them: device-to-device into the ring, `stream` waits for that
  // only, then one device-to-host copy follows on the side stream. Throws std::runtime_error on a
  // CUDA failure.
  void copy_from_device(QueuedOp& op, const std::vector<DeviceCopy>& copies, void* stream);
  void push(QueuedOp op);
  // Waits until every pushed op is written.
  void drain();
  // Failures of the writer not reported yet (each once), and the count and first of all of them.
  std::vector<std::string> take_failures();
  int failures() const;
  std::string first_failure() const;
  int64_t queued() const;

 private:
  void run();
  // n bytes of the device ring in op order, and the stream (a cudaStream_t) that copies into them,
  // made to wait on the device for the device-to-host copies of the older ranges they reuse;
  // nullptr without device staging or when n exceeds the ring.
  void* dev_reserve(size_t n, uint64_t& pos);
  std::function<std::string(const QueuedOp&, const char*)> write_;
  Policy policy_;
  char* base_ = nullptr;
  size_t cap_ = 0;
  bool pinned_ = false;
  void* side_ = nullptr;  // cudaStream_t, created at the first device copy
  // the device ring; touched on the engine's thread only (ssmc_end_op), and by the destructor
  void* stage_ = nullptr;  // cudaStream_t of the copies into the device ring
  char* dev_base_ = nullptr;
  size_t dev_cap_ = 0;
  uint64_t dev_head_ = 0, dev_tail_ = 0;
  struct DevRange {
    uint64_t end;
    void* done;  // cudaEvent_t recorded after the range's device-to-host copy
  };
  std::deque<DevRange> dev_inflight_;
  int64_t dev_staged_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // head/tail, queue and writing changes
  uint64_t head_ = 0, tail_ = 0;
  std::deque<QueuedOp> queue_;
  bool writing_ = false, stop_ = false;
  std::vector<std::string> unreported_;
  int failures_ = 0;
  std::string first_failure_;
  std::thread thread_;
};

}  // namespace ssmc_async
