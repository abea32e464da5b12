// One writer per trace (formats/trace.h TraceWriter, capture/ssmcheck_capture.h): a second live
// capture of one path is refused naming it, within a process and across processes, and the first
// trace stays intact; a crashed capture's lock died with it, so it is moved aside and recovered;
// a C capture handle shared by threads serialises its calls and keeps an op to the thread that
// began it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "capture/ssmcheck_capture.h"
#include "tests/support/trace_support.h"

namespace ssm::test {
namespace {

Recorded small_trace() { return record(case_of("tiny", HMode::f32, 3), "alloc; prefill 3; checkpoint; decode"); }

// The refusal a second writer gets: a FormatError naming the path.
std::string second_writer_refusal(const std::string& path, const formats::TraceHeader& h) {
  try {
    formats::TraceWriter w(path, h);
  } catch (const formats::FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceWriterLock, ASecondWriterInTheSameProcessIsRefusedAndTheFirstTraceIsIntact) {
  TempDir d;
  const Recorded r = small_trace();
  const std::string path = d.file("t.h5");
  formats::TraceWriter first(path, r.header);
  first.append(r.ops[0]);
  const std::string why = second_writer_refusal(path, r.header);
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_NE(why.find("another capture of this path is live"), std::string::npos) << why;
  for (size_t i = 1; i < r.ops.size(); ++i) first.append(r.ops[i]);
  first.close();
  const formats::Trace t = formats::read_trace(path);
  ASSERT_EQ(t.ops.size(), r.ops.size());
  EXPECT_TRUE(t.finished);
  // nothing of the refused writer is left beside the trace
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.path())) entries += e.path().filename() != "t.h5";
  EXPECT_EQ(entries, 0);
  // a writer after the first closed is a new capture of the path, as before
  formats::TraceWriter again(path, r.header);
  again.append(r.ops[0]);
  again.close();
  EXPECT_EQ(formats::read_trace(path).ops.size(), 1u);
}

TEST(TraceWriterLock, TwoConcurrentCapturesInTwoProcessesGiveOneRefusalAndOneIntactTrace) {
  TempDir d;
  const Recorded r = small_trace();
  const std::string path = d.file("t.h5");
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the first capture: live until the parent has tried
    int rc = 0;
    try {
      formats::TraceWriter w(path, r.header);
      w.append(r.ops[0]);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) rc = 3;
      if (read(go[0], &c, 1) != 1) rc = 4;
      for (size_t i = 1; i < r.ops.size(); ++i) w.append(r.ops[i]);
      w.close();
    } catch (...) {
      rc = 2;
    }
    _exit(rc);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const std::string why = second_writer_refusal(path, r.header);
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_NE(why.find("one writer per trace"), std::string::npos) << why;
  const formats::Trace t = formats::read_trace(path);
  ASSERT_EQ(t.ops.size(), r.ops.size());
  for (size_t i = 0; i < r.ops.size(); ++i) EXPECT_TRUE(t.ops[i].op == r.ops[i].op) << i;
  EXPECT_FALSE(std::filesystem::exists(formats::trace_partial_dir(path)));
}

TEST(TraceWriterLock, ACrashedCapturesLockDiedWithItSoItIsMovedAsideAndRecovered) {
  TempDir d;
  const Recorded r = small_trace();
  const std::string path = d.file("t.h5");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    formats::TraceWriter* w = new formats::TraceWriter(path, r.header);  // never closed nor destroyed: a crash
    w->append(r.ops[0]);
    w->append(r.ops[1]);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  formats::TraceWriter next(path, r.header);
  ASSERT_FALSE(next.moved_aside().empty());
  const formats::Trace crashed = formats::read_trace(next.moved_aside());
  EXPECT_FALSE(crashed.finished);
  EXPECT_EQ(crashed.ops.size(), 2u);
}

TEST(TraceWriterLock, ACaptureHandleSharedByThreadsKeepsAnOpToTheThreadThatBeganIt) {
  TempDir d;
  const Recorded r = small_trace();
  const std::string path = d.file("c.h5");
  ssmc_trace* t = nullptr;
  ASSERT_EQ(ssmc_open(path.c_str(), "lock test", "lock test", "tiny", "f32", &t), SSMC_OK);
  ASSERT_EQ(ssmc_set_pool(t, 2, nullptr, 4, 1), SSMC_OK);
  const LayerSpec& s = r.header.model.spec.layers.at(0);
  const LayerWeights& w = r.header.model.weights.at(0);
  ssmc_layer_desc desc = {
      s.nk, s.nv, s.kd, s.vd, s.d_conv, s.conv_bias ? 1 : 0, s.output_gate == OutputGate::sigmoid ? 1 : 0, s.eps};
  for (size_t l = 0; l < r.header.model.spec.layers.size(); ++l)
    ASSERT_EQ(ssmc_add_layer(t, &desc, w.conv_w.data(), s.conv_bias ? w.conv_bias.data() : nullptr, w.A_log.data(),
                             w.dt_bias.data(), w.norm_w.data()),
              SSMC_OK)
        << ssmc_last_error();
  ASSERT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK) << ssmc_last_error();
  ssmc_status other_begin = SSMC_OK, other_refusal = SSMC_OK;
  std::string other_error;
  std::thread([&] {
    other_refusal = ssmc_op_refused(t, "bad_slot");
    other_error = ssmc_last_error();
    other_begin = ssmc_begin_op(t, "alloc @1");
  }).join();
  EXPECT_EQ(other_refusal, SSMC_ERR_ORDER);
  EXPECT_NE(other_error.find("begun by another thread"), std::string::npos) << other_error;
  EXPECT_EQ(other_begin, SSMC_ERR_ORDER);
  ASSERT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();  // the op survived the other thread's calls
  // ops begun and ended by several threads in turn are captured in order
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        while (ssmc_begin_op(t, "checkpoint") != SSMC_OK) std::this_thread::yield();
        EXPECT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ssmc_op_count(t), 21);
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  EXPECT_EQ(formats::read_trace(path).ops.size(), 21u);
}

}  // namespace
}  // namespace ssm::test
