// The lockstep's shared inputs (fuzz/shared_inputs.h): both sides of an op get what the input
// source gives for their key, generated once per key; forget() drops what only one side took.
#include <gtest/gtest.h>

#include <thread>

#include "fuzz/shared_inputs.h"

namespace ssm::fuzz {
namespace {

// A source that says which call made its inputs: rows holds the key's step, x[0] the call count.
struct CountingSource {
  int calls = 0;
  InputSource source() {
    return [this](const InputKey& k, int rows) {
      StepInputs in;
      in.rows = rows;
      in.layers.resize(1);
      in.layers[0].conv_in = {float(++calls), float(k.step), float(k.seq), float(k.batch_row)};
      return in;
    };
  }
};

InputKey key(int op, int step, int seq, int row) { return InputKey{op, step, seq, row}; }

TEST(SharedInputs, EachKeyIsGeneratedOnceForBothSides) {
  CountingSource counting;
  SharedInputs shared(counting.source());
  InputSource model = shared.source(), sut = shared.source();
  const StepInputs m0 = model(key(3, 1, 0, 0), 4), m1 = model(key(3, 2, 1, 1), 1);
  const StepInputs s0 = sut(key(3, 1, 0, 0), 4), s1 = sut(key(3, 2, 1, 1), 1);
  EXPECT_EQ(counting.calls, 2);
  EXPECT_EQ(m0.layers[0].conv_in, s0.layers[0].conv_in);
  EXPECT_EQ(m1.layers[0].conv_in, s1.layers[0].conv_in);
  EXPECT_EQ(s0.rows, 4);
  EXPECT_EQ(s1.layers[0].conv_in, (std::vector<float>{2, 2, 1, 1}));
  // another row count, op or row is another key
  sut(key(3, 1, 0, 0), 2);
  sut(key(4, 1, 0, 0), 4);
  sut(key(3, 1, 0, 1), 4);
  EXPECT_EQ(counting.calls, 5);
}

TEST(SharedInputs, ForgetDropsWhatOnlyOneSideTook) {
  CountingSource counting;
  SharedInputs shared(counting.source());
  InputSource model = shared.source(), sut = shared.source();
  model(key(0, 0, 0, 0), 3);  // the other side refused the op before asking
  shared.forget();
  const StepInputs again = sut(key(0, 0, 0, 0), 3);
  EXPECT_EQ(counting.calls, 2);
  EXPECT_EQ(again.layers[0].conv_in[0], 2.0f);  // generated anew, not the forgotten copy
}

TEST(SharedInputs, BothSidesAtOnceGetTheSameInputs) {
  CountingSource counting;
  SharedInputs shared(counting.source());
  InputSource model = shared.source(), sut = shared.source();
  std::vector<StepInputs> a(200), b(200);
  std::thread t([&] {
    for (int i = 0; i < 200; ++i) a[size_t(i)] = model(key(1, i, i % 7, 0), 1);
  });
  for (int i = 0; i < 200; ++i) b[size_t(i)] = sut(key(1, i, i % 7, 0), 1);
  t.join();
  EXPECT_EQ(counting.calls, 200);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].layers[0].conv_in, b[i].layers[0].conv_in) << "key " << i;
}

}  // namespace
}  // namespace ssm::fuzz
