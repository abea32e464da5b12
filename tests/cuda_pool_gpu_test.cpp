// The device pool: ops on one slot leave every other slot's bytes and every guard band
// unchanged; async checkpoints are ordered by their event; errors match the reference and
// change nothing.
#include <gtest/gtest.h>

#include <map>

#include "cuda/check.h"
#include "cuda/engine.h"
#include "cuda/occupy.h"
#include "cuda/pool.h"
#include "cuda_test_support.h"

namespace ssm::test {
namespace {

using cuda::PoolFamily;

class PoolGpu : public GpuTest {};

struct Range { size_t begin, end; };

// Byte ranges of `slot` (and of the dummy slot and snapshot `snap`) inside one family.
std::vector<Range> allowed(const cuda::CudaBackend& cb, const PoolConfig& pool, int l, PoolFamily f, int slot, int snap) {
  std::vector<Range> v;
  const size_t p = cb.family_pitch(l, f);
  for (int s : {slot, pool.max_slots}) {
    switch (f) {
      case PoolFamily::h_intermediates:
        v.push_back({cb.family_offset(l, f, s, 0), cb.family_offset(l, f, s, 0) + p * size_t(pool.capacity(s))});
        break;
      case PoolFamily::conv_intermediates:
        v.push_back({cb.family_offset(l, f, s, 0), cb.family_offset(l, f, s, 0) + p * size_t(pool.conv_capacity)});
        break;
      case PoolFamily::snapshot_h: case PoolFamily::snapshot_conv:
        v.push_back({size_t(snap) * p, size_t(snap + 1) * p});
        break;
      default:
        v.push_back({cb.family_offset(l, f, s, 0), cb.family_offset(l, f, s, 0) + p});
    }
  }
  return v;
}

const PoolFamily kFamilies[] = {PoolFamily::h, PoolFamily::conv, PoolFamily::h_checkpoint, PoolFamily::conv_checkpoint,
                            PoolFamily::h_intermediates, PoolFamily::conv_intermediates, PoolFamily::snapshot_h,
                            PoolFamily::snapshot_conv, PoolFamily::stage};

// A new buffer is zero before any stream writes it. cudaMemset runs on the legacy stream and the
// engine's streams are non-blocking: when every SM was busy (another process sharing the GPU), the
// first upload of inputs went through the copy engine and the memset zeroed it afterwards, so a
// 14-process H200 campaign saw all-zero outputs on every kind of op. Here the SMs are held busy on
// a non-blocking stream while the buffer is made and written by a copy on another one.
TEST_F(PoolGpu, NewBufferIsZeroedBeforeAnyStreamWritesIt) {
  cudaStream_t busy = nullptr, copy = nullptr;
  SSM_CUDA(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  SSM_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  const size_t n = 1 << 20;
  std::vector<float> ones(n, 1.0f), back(n, 0.0f);
  cuda::launch_occupy_sms(busy, 300);
  {
    cuda::DeviceBuffer b(n * 4, "test buffer");
    SSM_CUDA(cudaMemcpyAsync(b.get(), ones.data(), n * 4, cudaMemcpyHostToDevice, copy));
    SSM_CUDA(cudaDeviceSynchronize());
    SSM_CUDA(cudaMemcpy(back.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
  }
  SSM_CUDA(cudaStreamDestroy(busy));
  SSM_CUDA(cudaStreamDestroy(copy));
  size_t zeros = 0;
  for (float v : back) zeros += v == 0.0f;
  EXPECT_EQ(zeros, 0u) << "the zeroing of a new buffer ran after a write on a non-blocking stream";
}

TEST_F(PoolGpu, UntouchedSlotsAndGuardBands) {
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    GpuCase c;
    c.preset = "odd-d";
    c.mode = mode;
    c.seed = 41;
    std::printf("gpu case: %s (capacities 3,1,4,2)\n", c.name().c_str());
    PoolConfig pool = c.pool();
    pool.max_slots = 4;
    pool.h_capacity = {3, 1, 4, 2};
    pool.conv_capacity = 4;
    const ModelSpec spec = c.spec();
    cuda::CudaBackend cb;
    cb.create_pool(c.model(), pool);
    std::vector<int> slots;
    for (int q = 0; q < 3; ++q) slots.push_back(cb.alloc(1));  // slots 1, 3, 0 (smallest fitting first)
    for (size_t q = 0; q < slots.size(); ++q) {
      cb.prefill(slots[q], make_inputs(spec, c.gen(), 0, int(q), 0, 3));
      cb.verify({slots[q]}, 2, VerifyArm::exact, {make_inputs(spec, c.gen(), 1, int(q), 0, 2)});
      cb.checkpoint(slots[q], false);
      cb.snapshot_save(slots[q], int(q) % 2);
    }
    const int target = slots[1];
    std::map<std::pair<int, int>, std::vector<uint8_t>> before;
    for (int l = 0; l < int(spec.layers.size()); ++l)
      for (PoolFamily f : kFamilies) before[{l, int(f)}] = cb.read_family(l, f);

    auto in = [&](int op, int rows) { return make_inputs(spec, c.gen(), op, 1, 0, rows); };
    cb.decode({target}, {in(2, 1)});
    cb.verify({target}, 3, VerifyArm::exact, {in(3, 3)});
    cb.commit(target, 2, 3);
    cb.verify({target}, 3, VerifyArm::wy, {in(4, 3)});
    cb.rollback(target, 1, false);
    cb.checkpoint(target, true);
    cb.rollback(target, 0, true);
    cb.snapshot_save(target, 1);
    cb.decode({kPadRow, target, kPadRow}, {in(5, 1), in(6, 1), in(7, 1)});
    cb.snapshot_restore(target, 1);
    cb.prefill(target, in(8, 4));
    cb.verify({target, kPadRow}, 2, VerifyArm::wy, {in(9, 2), in(10, 2)});

    for (int l = 0; l < int(spec.layers.size()); ++l)
      for (PoolFamily f : kFamilies) {
        const std::vector<uint8_t>& b = before[{l, int(f)}];
        const std::vector<uint8_t> a = cb.read_family(l, f);
        ASSERT_EQ(a.size(), b.size());
        const std::vector<Range> ok = allowed(cb, pool, l, f, target, 1);
        for (size_t i = 0; i < a.size(); ++i) {
          if (a[i] == b[i]) continue;
          bool inside = false;
          for (const Range& r : ok) inside |= i >= r.begin && i < r.end;
          ASSERT_TRUE(inside) << c.name() << " layer " << l << " family " << int(f) << " byte " << i
                              << " changed outside slot " << target;
        }
      }
    EXPECT_EQ(cb.check_guards(), "") << c.name();
  }
}

// checkpoint_async and rollback_and_checkpoint_async run on the copy stream; the next reader
// of the slot waits for their event. A decode issued right after must neither change what the
// checkpoint holds nor read a half-restored state. Large state (36 layers of qwen3-next-80b)
// gives the copy stream real work to race against.
TEST_F(PoolGpu, AsyncCheckpointObservedAfterItsEvent) {
  GpuCase c;
  c.preset = "qwen3-next-80b";
  c.slots = 2;
  c.capacity = 3;
  c.seed = 43;
  std::printf("gpu case: %s\n", c.name().c_str());
  GpuPair p(c);
  const int sa = p.a->alloc(3), sb = p.b->alloc(3);
  for (auto* be : {p.a.get(), p.b.get()}) be->prefill(be == p.a.get() ? sa : sb, p.inputs(0, 0, 3));

  p.a->checkpoint(sa, true);
  EXPECT_TRUE(p.a->async_pending(sa));
  p.a->decode({sa}, {p.inputs(1, 0, 1)});
  EXPECT_FALSE(p.a->async_pending(sa));
  p.b->checkpoint(sb, false);
  p.b->synchronize();
  p.b->decode({sb}, {p.inputs(1, 0, 1)});
  cmp::StateReport r = bitwise_state(p.b->export_state(sb), p.a->export_state(sa), "checkpoint_async; decode");
  ASSERT_TRUE(r.pass()) << state_report(r);

  for (auto* be : {p.a.get(), p.b.get()}) be->verify({be == p.a.get() ? sa : sb}, 4, VerifyArm::exact, {p.inputs(2, 0, 4)});
  p.a->rollback(sa, 2, true);
  EXPECT_TRUE(p.a->async_pending(sa));
  p.a->decode({sa}, {p.inputs(3, 0, 1)});
  p.b->rollback(sb, 2, false);
  p.b->checkpoint(sb, false);
  p.b->synchronize();
  p.b->decode({sb}, {p.inputs(3, 0, 1)});
  r = bitwise_state(p.b->export_state(sb), p.a->export_state(sa), "rollback_and_checkpoint_async 2; decode");
  ASSERT_TRUE(r.pass()) << state_report(r);

  p.a->checkpoint(sa, true);
  p.a->rollback(sa, 0, false);  // restores what the async copy wrote, after its event
  const SequenceState st = p.a->export_state(sa);
  for (const LayerState& l : st.layers) {
    ASSERT_TRUE(l.h.bit_equal(*l.h_checkpoint));
    ASSERT_TRUE(l.conv.bit_equal(*l.conv_checkpoint));
  }
  EXPECT_EQ(p.a->check_guards(), "");
}

// check_guards reads every band in one gathered copy (Engine::read_back): a byte changed in any
// band of a pool buffer or of the scratch is named with its buffer and side, and once restored
// the bands read intact again.
TEST_F(PoolGpu, DamagedGuardBandsAreNamed) {
  GpuCase c;
  c.preset = "ple-odd";
  c.slots = 2;
  c.capacity = 3;
  c.seed = 44;
  std::printf("gpu case: %s\n", c.name().c_str());
  GpuPair p(c);
  const int s = p.a->alloc(3);
  p.a->verify({s}, 3, VerifyArm::wy, {p.inputs(0, 0, 3)});
  (void)p.a->export_state(s);  // the readback staging exists now, and is checked too
  ASSERT_EQ(p.a->check_guards(), "");
  const cuda::Engine& e = p.a->engine();
  struct Hit {
    const cuda::DeviceBuffer* buf;
    bool after;
    size_t byte;
  };
  const Hit hits[] = {{&e.pool().family(1, PoolFamily::h), true, 7},
                      {&e.pool().family(0, PoolFamily::h_checkpoint), false, cuda::DeviceBuffer::kGuard - 1},
                      {&e.pool().family(2, PoolFamily::conv_intermediates), true, 0}};
  for (const Hit& h : hits) {
    char* at = const_cast<char*>(h.after ? h.buf->guard_after() : h.buf->guard_before()) + h.byte;
    uint8_t was = 0;
    SSM_CUDA(cudaMemcpy(&was, at, 1, cudaMemcpyDeviceToHost));
    SSM_CUDA(cudaMemset(at, was ^ 0x5A, 1));
    const std::string expect = h.buf->name() + (h.after ? ": guard after byte " + std::to_string(h.byte)
                                                        : ": guard before byte " + std::to_string(cuda::DeviceBuffer::kGuard - h.byte)) +
                               " changed";
    EXPECT_NE(p.a->check_guards().find(expect), std::string::npos) << "expected '" << expect << "' in '"
                                                                   << p.a->check_guards() << "'";
    SSM_CUDA(cudaMemset(at, was, 1));
    EXPECT_EQ(p.a->check_guards(), "");
  }
}

// Failing ops raise the reference's error kind and change nothing (run_pair compares every
// state after every op, failed ones included).
TEST_F(PoolGpu, ErrorsMatchReference) {
  const char* script =
      "alloc; prefill 3; commit 1 2; verify 6; rollback 1; verify 3; commit 0 3; commit 4 3; commit 2 2; "
      "rollback 3; rollback 2; rollback 0; to_f16; snapshot_restore 1; snapshot_save 5; decode @0,0; "
      "verify 3 @0,pad; rollback 3; alloc @1; alloc @2; alloc @3; decode @1,2; release @2; decode @2";
  for (HMode m : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    GpuCase c;
    c.preset = "odd-b";
    c.mode = m;
    c.seed = 47;
    run_pair(c, script);
    if (HasFatalFailure()) return;
  }
  // bad inputs: NaN in one row of a batch
  GpuCase c;
  c.preset = "tiny";
  std::printf("gpu case: %s\n", c.name().c_str());
  GpuPair p(c);
  const int s0 = p.a->alloc(0), s1 = p.a->alloc(0);
  p.a->prefill(s0, p.inputs(0, 0, 2));
  p.a->prefill(s1, p.inputs(0, 1, 2));
  const SequenceState b0 = p.a->export_state(s0), b1 = p.a->export_state(s1);
  StepInputs bad = p.inputs(1, 1, 1);
  bad.layers.back().conv_in[3] = std::numeric_limits<float>::quiet_NaN();
  try {
    p.a->decode({s0, s1}, {p.inputs(1, 0, 1), bad});
    FAIL() << "decode with NaN input did not throw";
  } catch (const StateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
  }
  ASSERT_TRUE(bitwise_state(b0, p.a->export_state(s0), "after failed decode").pass());
  ASSERT_TRUE(bitwise_state(b1, p.a->export_state(s1), "after failed decode").pass());
}

}  // namespace
}  // namespace ssm::test
