// Asynchronous capture (capture/ssmcheck_capture.h, ABI minor 5) with host pointers, no GPU: the
// queued ops are written as a synchronous capture writes them and replay bit for bit; both
// back-pressure policies under a small staging pool; the writer's failures reported at the next
// begin, at flush and at close; a crash (abandon) after a flush recovered. Counterpart on a GPU:
// capture_async_gpu_test.cpp (device pointers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fmt/core.h>
#include <functional>
#include <thread>

#include "capture/ssmcheck_capture.h"
#include "tests/support/capture_abi.h"
#include "tests/support/trace_support.h"

namespace ssm::test {
namespace {

const char* kScript =
    "alloc; prefill 3; checkpoint; alloc @1; decode @0,1; verify 3 @1,0; commit 2 3 @1; decode @1,pad,0";

Recorded small() { return record(case_of("tiny", HMode::f32, 7), kScript); }

// The bytes an op puts into the staging pool with host pointers: each array rounded up to 16
// bytes (capture/capture.cpp lay_out), the op to 256. io: inputs and outputs only.
size_t staged_bytes(const formats::TraceOp& op, bool with_states) {
  size_t n = 0;
  auto add = [&](size_t b) { n += (b + 15) / 16 * 16; };
  for (const StepInputs& in : op.inputs)
    for (const LayerRows& r : in.layers)
      for (const auto* v : {&r.conv_in, &r.dt_in, &r.beta_in, &r.gate_in}) add(v->size() * 4);
  for (const auto& o : op.outputs)
    if (o)
      for (const auto& l : o->layers) add(l.size() * 4);
  if (with_states)
    for (const formats::TraceState& s : op.states) {
      if (s.state.h_prefill_stage) add(s.state.h_prefill_stage->bytes());
      for (const LayerState& ls : s.state.layers) {
        add(ls.h.bytes());
        add(ls.conv.bytes());
        if (ls.h_checkpoint) add(ls.h_checkpoint->bytes());
        if (ls.conv_checkpoint) add(ls.conv_checkpoint->bytes());
        for (const Tensor& x : ls.h_intermediates) add(x.bytes());
        for (const Tensor& x : ls.conv_intermediates) add(x.bytes());
      }
    }
  return (n + 255) / 256 * 256;
}

// Every op of `got` equals the recorded one (op, refusal, inputs, outputs, states bit for bit);
// `dropped`: ops whose states the drop policy left out (checked marked and stateless).
void expect_same(const Recorded& r, const formats::Trace& got, const std::vector<bool>& dropped = {}) {
  ASSERT_EQ(got.ops.size(), r.ops.size());
  for (size_t i = 0; i < r.ops.size(); ++i) {
    SCOPED_TRACE(fmt::format("op {} '{}'", i, to_string(r.ops[i].op)));
    const formats::TraceOp& a = r.ops[i];
    const formats::TraceOp& b = got.ops[i];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.refused, b.refused);
    ASSERT_EQ(a.inputs.size(), b.inputs.size());
    for (size_t e = 0; e < a.inputs.size(); ++e)
      for (size_t l = 0; l < a.inputs[e].layers.size(); ++l) {
        EXPECT_EQ(a.inputs[e].layers[l].conv_in, b.inputs[e].layers[l].conv_in);
        EXPECT_EQ(a.inputs[e].layers[l].gate_in, b.inputs[e].layers[l].gate_in);
        EXPECT_EQ(a.inputs[e].layers[l].dt_in, b.inputs[e].layers[l].dt_in);
        EXPECT_EQ(a.inputs[e].layers[l].beta_in, b.inputs[e].layers[l].beta_in);
      }
    ASSERT_EQ(a.outputs.size(), b.outputs.size());
    for (size_t e = 0; e < a.outputs.size(); ++e) {
      ASSERT_EQ(a.outputs[e].has_value(), b.outputs[e].has_value());
      if (a.outputs[e]) {
        EXPECT_EQ(a.outputs[e]->layers, b.outputs[e]->layers);
      }
    }
    const bool drop = i < dropped.size() && dropped[i];
    EXPECT_EQ(b.states_dropped, drop);
    if (drop) {
      EXPECT_TRUE(b.states.empty());
      continue;
    }
    ASSERT_EQ(a.states.size(), b.states.size());
    for (size_t s = 0; s < a.states.size(); ++s) {
      const SequenceState& x = a.states[s].state;
      const SequenceState& y = b.states[s].state;
      EXPECT_EQ(x.last_verify_k, y.last_verify_k);
      ASSERT_EQ(x.layers.size(), y.layers.size());
      for (size_t l = 0; l < x.layers.size(); ++l) {
        ASSERT_EQ(x.layers[l].h.bytes(), y.layers[l].h.bytes());
        EXPECT_EQ(std::memcmp(x.layers[l].h.raw(), y.layers[l].h.raw(), x.layers[l].h.bytes()), 0);
        EXPECT_EQ(std::memcmp(x.layers[l].conv.raw(), y.layers[l].conv.raw(), x.layers[l].conv.bytes()), 0);
        EXPECT_EQ(x.layers[l].h_intermediates.size(), y.layers[l].h_intermediates.size());
        EXPECT_EQ(x.layers[l].h_checkpoint.has_value(), y.layers[l].h_checkpoint.has_value());
      }
    }
  }
}

ssmc_trace* open_async(const Recorded& r, const std::string& path, int64_t staging, int policy) {
  ssmc_trace* t = open_for(r, path);
  if (!t) return nullptr;
  EXPECT_EQ(ssmc_set_async(t, staging, policy), SSMC_OK) << ssmc_last_error();
  return t;
}

TEST(CaptureAsync, TheLibraryIsMinorFive) { EXPECT_GE(ssmc_abi_minor(), 5); }

TEST(CaptureAsync, TheLibraryIsMinorSeven) { EXPECT_GE(ssmc_abi_minor(), 7); }

// Device staging (minor 7) is refused by name out of order or with a bad size; where it cannot be
// had (no CUDA in the build, or no device: this suite's CPU machines) it says so and the capture
// goes on without it. Host pointers never go through it (tests/capture_async_gpu_test.cpp: device
// arrays through it on a GPU).
TEST(CaptureAsync, DeviceStagingIsRefusedByNameOutOfOrderAndTheCaptureGoesOnWithoutIt) {
  TempDir d;
  const Recorded r = small();
  ssmc_trace* t = open_for(r, d.file("s.h5"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ssmc_set_device_staging(t, 1 << 20), SSMC_ERR_ORDER);
  EXPECT_NE(std::string(ssmc_last_error()).find("not asynchronous"), std::string::npos) << ssmc_last_error();
  ASSERT_EQ(ssmc_set_async(t, 0, SSMC_BLOCK), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(ssmc_set_device_staging(t, 100), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("bytes 100 outside 4096..2^40"), std::string::npos)
      << ssmc_last_error();
  const ssmc_status st = ssmc_set_device_staging(t, 1 << 20);
  const std::string why = st == SSMC_OK ? "" : ssmc_last_error();
  std::printf("ssmc_set_device_staging: %d %s\n", int(st), why.c_str());
  if (st != SSMC_OK) {  // no CUDA in the build or no device: named, and the capture is as before
    EXPECT_EQ(st, SSMC_ERR_DEVICE);
    EXPECT_NE(why.find("the capture goes on without it"), std::string::npos) << why;
  } else {
    EXPECT_EQ(ssmc_set_device_staging(t, 1 << 20), SSMC_ERR_ORDER) << "twice";
  }
  for (const formats::TraceOp& op : r.ops)
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(ssmc_device_staged(t), 0) << "host arrays never go through the device staging";
  EXPECT_EQ(ssmc_set_device_staging(t, 1 << 20), SSMC_ERR_ORDER) << "after the first op";
  EXPECT_NE(std::string(ssmc_last_error()).find("after the first ssmc_begin_op"), std::string::npos)
      << ssmc_last_error();
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  expect_same(r, formats::read_trace(d.file("s.h5")));
}

TEST(CaptureAsync, QueuedOpsAreWrittenAsASynchronousCaptureWritesThemAndReplayBitForBit) {
  TempDir d;
  const Recorded r = small();
  ASSERT_GE(r.ops.size(), 8u);
  ssmc_trace* t = open_async(r, d.file("a.h5"), 0, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  for (const formats::TraceOp& op : r.ops)
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(ssmc_op_count(t), int(r.ops.size()));
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  expect_same(r, formats::read_trace(d.file("a.h5")));
  const Shell rep = sh(std::string(SSMCHECK_BIN) + " replay " + q(d.file("a.h5")));
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find(fmt::format("AGREE: {} ops", r.ops.size())), std::string::npos) << rep.out;
}

TEST(CaptureAsync, BlockPolicyWithAPoolSmallerThanTwoOpsWritesEveryOpAndDropsNothing) {
  TempDir d;
  const Recorded r = small();
  size_t most = 0;
  for (const formats::TraceOp& op : r.ops) most = std::max(most, staged_bytes(op, true));
  const int64_t pool = int64_t(std::max<size_t>(4096, most + most / 2));
  std::printf("largest op %zu bytes, pool %lld bytes\n", most, (long long)pool);
  ssmc_trace* t = open_async(r, d.file("b.h5"), pool, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  for (const formats::TraceOp& op : r.ops)
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(ssmc_states_dropped(t), 0);
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  expect_same(r, formats::read_trace(d.file("b.h5")));
}

TEST(CaptureAsync, BlockPolicyRefusesAnOpLargerThanThePoolNamingBothSizesAndGoesOn) {
  TempDir d;
  const Recorded r = small();
  const int64_t pool = 4096;
  ssmc_trace* t = open_async(r, d.file("c.h5"), pool, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  size_t written = 0;
  for (const formats::TraceOp& op : r.ops) {
    const size_t need = staged_bytes(op, true);
    const ssmc_status st = capture_op(t, r.header.model.spec, op, SSMC_HOST);
    if (need <= size_t(pool)) {
      ASSERT_EQ(st, SSMC_OK) << ssmc_last_error();
      ++written;
      continue;
    }
    EXPECT_EQ(st, SSMC_ERR_INVALID);
    const std::string why = ssmc_last_error();
    EXPECT_NE(why.find(fmt::format("needs {} bytes of staging, more than the 4096", need)), std::string::npos) << why;
    EXPECT_NE(why.find("staging_bytes"), std::string::npos) << why;
  }
  ASSERT_GT(written, 0u);
  ASSERT_LT(written, r.ops.size());
  EXPECT_EQ(ssmc_op_count(t), int(written));
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(formats::read_trace(d.file("c.h5")).ops.size(), written);
}

TEST(CaptureAsync, DropPolicyLeavesOutTheStatesThatDoNotFitMarksThemAndTheTraceReplays) {
  TempDir d;
  const Recorded r = small();
  // a pool that holds every op's inputs and outputs but no op's states besides
  size_t io = 4096;
  for (const formats::TraceOp& op : r.ops) io = std::max(io, staged_bytes(op, false));
  std::vector<bool> dropped;
  int64_t n_dropped = 0;
  for (const formats::TraceOp& op : r.ops) {
    dropped.push_back(!op.states.empty() && staged_bytes(op, true) > io);
    n_dropped += dropped.back();
  }
  ASSERT_GT(n_dropped, 0);
  ssmc_trace* t = open_async(r, d.file("e.h5"), int64_t(io), SSMC_DROP_STATES);
  ASSERT_NE(t, nullptr);
  for (const formats::TraceOp& op : r.ops)
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(ssmc_states_dropped(t), n_dropped);
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  expect_same(r, formats::read_trace(d.file("e.h5")), dropped);
  const Shell rep = sh(std::string(SSMCHECK_BIN) + " replay " + q(d.file("e.h5")));
  EXPECT_EQ(rep.code, 0) << rep.out;
}

TEST(CaptureAsync, DropPolicyWithRoomDropsNothing) {
  TempDir d;
  const Recorded r = small();
  ssmc_trace* t = open_async(r, d.file("f.h5"), 64 << 20, SSMC_DROP_STATES);
  ASSERT_NE(t, nullptr);
  for (const formats::TraceOp& op : r.ops) {
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << ssmc_last_error();
    ASSERT_EQ(ssmc_flush(t), SSMC_OK) << ssmc_last_error();
  }
  EXPECT_EQ(ssmc_states_dropped(t), 0);
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  expect_same(r, formats::read_trace(d.file("f.h5")));
}

TEST(CaptureAsync, TheWritersFailureIsReportedAtFlushAndAtCloseAndTheOtherOpsStay) {
  TempDir d;
  const Recorded r = small();
  ssmc_trace* t = open_async(r, d.file("g.h5"), 0, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  size_t bad = 0;  // the first decode: one of its inputs NaN, which only the writer sees
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].op.kind == OpKind::decode) {
      bad = i;
      break;
    }
  ASSERT_GT(bad, 0u);
  for (size_t i = 0; i < r.ops.size(); ++i) {
    formats::TraceOp op = r.ops[i];
    if (i == bad) op.inputs[0].layers[0].conv_in[5] = std::nanf("");
    ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST), SSMC_OK) << i << ": " << ssmc_last_error();
    if (i == bad) {  // queued: the flush waits for the writer and reports its failure, once
      ASSERT_EQ(ssmc_flush(t), SSMC_ERR_INVALID);
      const std::string why = ssmc_last_error();
      EXPECT_NE(why.find(fmt::format("op {} '{}'", bad, to_string(op.op))), std::string::npos) << why;
      EXPECT_NE(why.find("background writer"), std::string::npos) << why;
      EXPECT_NE(why.find("non-finite"), std::string::npos) << why;
      EXPECT_EQ(ssmc_flush(t), SSMC_OK) << "reported once";
    }
  }
  EXPECT_EQ(ssmc_op_count(t), int(r.ops.size()) - 1);
  const ssmc_status closed = ssmc_close(t);
  EXPECT_EQ(closed, SSMC_ERR_INVALID);
  const std::string why = ssmc_last_error();
  EXPECT_NE(why.find("1 op(s) failed in the background writer"), std::string::npos) << why;
  const formats::Trace got = formats::read_trace(d.file("g.h5"));
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(got.ops.size(), r.ops.size() - 1);
}

TEST(CaptureAsync, ABeginAfterAFailureInTheWriterReturnsItAndBeginsNothing) {
  TempDir d;
  const Recorded r = small();
  ssmc_trace* t = open_async(r, d.file("h.h5"), 0, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK);
  ASSERT_EQ(ssmc_state_begin(t, 0, 0, 0), SSMC_OK);  // a state without "h": found by the writer
  std::vector<float> conv(size_t(r.header.model.spec.layers[0].conv_elems()), 0.0f);
  ASSERT_EQ(ssmc_state_tensor(t, 0, 0, "conv", 0, SSMC_F32, conv.data(), SSMC_HOST), SSMC_OK) << ssmc_last_error();
  ASSERT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();
  ssmc_status st = SSMC_OK;
  for (int i = 0; i < 2000 && st == SSMC_OK; ++i) {  // until the writer got to it
    st = ssmc_begin_op(t, "alloc");
    if (st == SSMC_OK) {
      ASSERT_EQ(ssmc_drop_op(t), SSMC_OK);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_EQ(st, SSMC_ERR_INVALID);
  EXPECT_NE(std::string(ssmc_last_error()).find("no \"h\""), std::string::npos) << ssmc_last_error();
  EXPECT_EQ(ssmc_end_op(t), SSMC_ERR_ORDER) << "the failed begin began nothing";
  EXPECT_EQ(ssmc_close(t), SSMC_ERR_INVALID);
}

TEST(CaptureAsync, ACrashAfterAFlushLosesAtMostTheQueuedOpsAndIsRecovered) {
  TempDir d;
  const Recorded r = small();
  const std::string path = d.file("p.h5");
  ssmc_trace* t = open_async(r, path, 0, SSMC_BLOCK);
  ASSERT_NE(t, nullptr);
  const size_t flushed = 4;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    ASSERT_EQ(capture_op(t, r.header.model.spec, r.ops[i], SSMC_HOST), SSMC_OK) << ssmc_last_error();
    if (i + 1 == flushed) {
      ASSERT_EQ(ssmc_flush(t), SSMC_OK) << ssmc_last_error();
    }
  }
  ssmc_abandon(t);  // as a crash: the ops queued after the flush may be lost
  const formats::Trace got = formats::read_trace(path);
  EXPECT_FALSE(got.finished);
  ASSERT_GE(got.ops.size(), flushed);
  ASSERT_LE(got.ops.size(), r.ops.size());
  Recorded prefix = r;
  prefix.ops.resize(got.ops.size());
  expect_same(prefix, got);
  const Shell rep = sh(std::string(SSMCHECK_BIN) + " replay " + q(path));
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("capture did not finish"), std::string::npos) << rep.out;
}

TEST(CaptureAsync, MisuseIsRefusedByName) {
  TempDir d;
  const Recorded r = small();
  ssmc_trace* t = open_for(r, d.file("m.h5"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ssmc_set_async(t, 100, SSMC_BLOCK), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("staging_bytes 100"), std::string::npos) << ssmc_last_error();
  EXPECT_EQ(ssmc_set_async(t, 0, 7), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("policy 7"), std::string::npos) << ssmc_last_error();
  EXPECT_EQ(ssmc_flush(t), SSMC_OK) << "a synchronous capture is durable already";
  ASSERT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK);
  EXPECT_EQ(ssmc_op_stream(t, nullptr), SSMC_ERR_ORDER);
  EXPECT_NE(std::string(ssmc_last_error()).find("not asynchronous"), std::string::npos) << ssmc_last_error();
  ASSERT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK);  // the refused call dropped the op
  ASSERT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();
  ssmc_abandon(t);

  ssmc_trace* a = open_async(r, d.file("n.h5"), 0, SSMC_BLOCK);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(ssmc_set_async(a, 0, SSMC_BLOCK), SSMC_ERR_ORDER);
  EXPECT_EQ(ssmc_op_stream(a, nullptr), SSMC_ERR_ORDER) << "outside an op";
  ASSERT_EQ(ssmc_begin_op(a, "alloc"), SSMC_OK);
  EXPECT_EQ(ssmc_state_tensor(a, 0, 0, "hh", 0, SSMC_F32, &r, SSMC_HOST), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("unknown field 'hh'"), std::string::npos) << ssmc_last_error();
  ASSERT_EQ(ssmc_begin_op(a, "alloc"), SSMC_OK);
  EXPECT_EQ(ssmc_state_tensor(a, 0, 99, "h", 0, SSMC_F32, &r, SSMC_HOST), SSMC_ERR_ARGUMENT);
  if (!ssmc_device_support()) {
    ASSERT_EQ(ssmc_begin_op(a, "alloc"), SSMC_OK);
    EXPECT_EQ(ssmc_state_tensor(a, 0, 0, "conv", 0, SSMC_F32, &r, SSMC_DEVICE), SSMC_ERR_DEVICE);
  }
  ASSERT_EQ(ssmc_begin_op(a, "alloc"), SSMC_OK);
  ASSERT_EQ(ssmc_end_op(a), SSMC_OK);
  ASSERT_EQ(ssmc_close(a), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(formats::read_trace(d.file("n.h5")).ops.size(), 1u);
}

}  // namespace
}  // namespace ssm::test
