// Bits across rebuilds (issue 41, item 2): a backend names its numerics by what determines them
// (Backend::numerics_id: the digest of its sources, compilers and flags, cmake/numerics.cmake), a
// trace recorded with the same numerics replays bit for bit whatever executable replays it, one with
// other numerics is judged under the classes and named, and `ssmcheck approve` re-stamps a trace only
// when these numerics reproduce it exactly. docs/trace-format.md, "Bits across rebuilds".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "formats/dump.h"
#include "formats/trace.h"
#include "formats/trace_stamp.h"
#include "reference/reference_backend.h"
#include "replay/gate.h"
#include "replay/replay.h"
#include "tests/support/shell.h"
#include "tests/support/file_bytes.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using test::q;
using test::sh;

// A reference trace of every op kind's common path, recorded by `ssmcheck record`.
std::string record(const test::TempDir& d, const std::string& name) {
  const std::string path = d.file(name);
  const auto r = sh(std::string(SSMCHECK_BIN) + " record --preset tiny --h-mode f16 --seed 5 --outputs -o " + q(path) +
                    " --ops 'alloc; prefill 3; checkpoint; verify 3; commit 1 3; to_f16; decode; rollback 0'");
  EXPECT_EQ(r.code, 0) << r.out;
  return path;
}

TEST(NumericsId, TheReferenceNamesItsSourcesDigestAndTheCLibrary) {
  ref::ReferenceBackend a, b;
  const std::string id = a.numerics_id();
  EXPECT_EQ(id.rfind("reference numerics:", 0), 0u) << id;
  EXPECT_NE(id.find(" glibc "), std::string::npos) << id;
  const std::string digest = id.substr(19, id.find(" glibc ") - 19);
  EXPECT_EQ(digest.size(), 16u) << id;
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(id, b.numerics_id());
  EXPECT_EQ(formats::build_id(a), id);  // what record writes
}

TEST(NumericsId, ATraceOfTheseNumericsReplaysBitForBitAndOneOfOthersIsNamed) {
  test::TempDir d("ssmcheck-numerics");
  const std::string path = record(d, "t.h5");
  formats::Trace t = formats::read_trace(path);
  ref::ReferenceBackend be;
  EXPECT_EQ(t.header.build, be.numerics_id());
  replay::ReplayResult r = replay::replay_trace(t, be);
  EXPECT_TRUE(r.pass()) << r.text();
  EXPECT_TRUE(r.bitwise) << r.judged;
  EXPECT_FALSE(r.other_numerics);
  // a trace of the executable era (or another rebuild): the classes, and said so
  t.header.build = "ssmcheck 0.1.0 exe:0123456789abcdef";
  ref::ReferenceBackend be2;
  r = replay::replay_trace(t, be2);
  EXPECT_TRUE(r.pass()) << r.text();
  EXPECT_FALSE(r.bitwise);
  EXPECT_TRUE(r.other_numerics);
  EXPECT_NE(r.judged.find("ssmcheck approve"), std::string::npos) << r.judged;
}

TEST(NumericsId, ApproveReStampsATraceTheseNumericsReproduceAndNothingElse) {
  test::TempDir d("ssmcheck-approve");
  const std::string path = record(d, "t.h5");
  const formats::Trace original = formats::read_trace(path);
  // stamped by other numerics: approve finds the states reproduced bit for bit and re-stamps
  formats::stamp_trace_build(path, "reference numerics:0000000000000000 glibc 0");
  EXPECT_EQ(formats::read_trace(path).header.build, "reference numerics:0000000000000000 glibc 0");
  auto r = sh(std::string(SSMCHECK_BIN) + " approve --dry-run " + q(path));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("would be approved (--dry-run)"), std::string::npos) << r.out;
  EXPECT_EQ(formats::read_trace(path).header.build, "reference numerics:0000000000000000 glibc 0");  // unchanged
  r = sh(std::string(SSMCHECK_BIN) + " approve " + q(path));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("approved: reproduced bit for bit (8 ops"), std::string::npos) << r.out;
  const formats::Trace stamped = formats::read_trace(path);
  EXPECT_EQ(stamped.header.build, original.header.build);
  ASSERT_EQ(stamped.ops.size(), original.ops.size());
  for (size_t i = 0; i < stamped.ops.size(); ++i)
    ASSERT_EQ(stamped.ops[i].states.size(), original.ops[i].states.size()) << "op " << i;
  r = sh(std::string(SSMCHECK_BIN) + " approve " + q(path));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("already stamped with these numerics"), std::string::npos) << r.out;

  // states these numerics do not reproduce (one h element one ULP off, as a kernel change would
  // leave them): not approved, exit 1, the file untouched
  std::vector<formats::TraceOp> ops = original.ops;
  formats::TraceHeader h = original.header;
  h.build = "reference numerics:1111111111111111 glibc 0";
  bool changed = false;
  for (auto& op : ops)
    for (auto& st : op.states)
      if (!changed && !st.state.layers.empty() && st.state.layers[0].h.dtype() == DType::f32) {
        float* v = st.state.layers[0].h.f32();
        for (int64_t e = 0; e < st.state.layers[0].h.size() && !changed; ++e)
          if (v[e] != 0.0f) {
            v[e] = std::nextafter(v[e], INFINITY);
            changed = true;
          }
      }
  ASSERT_TRUE(changed);
  const std::string off = d.file("off.h5");
  formats::write_trace(off, h, ops);
  const std::string before = test::file_bytes(off);
  r = sh(std::string(SSMCHECK_BIN) + " approve " + q(off));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("NOT approved"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("under the tolerance classes it agrees"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Re-record it"), std::string::npos) << r.out;
  EXPECT_EQ(test::file_bytes(off), before);
  // a trace of another backend is not this backend's to approve; nothing approved: exit 5
  h.backend = "cuda";
  const std::string other = d.file("other.h5");
  formats::write_trace(other, h, original.ops);
  r = sh(std::string(SSMCHECK_BIN) + " approve " + q(other));
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_NE(r.out.find("its states come from 'cuda'"), std::string::npos) << r.out;
}

// The gate's summary names the command that re-stamps golden traces recorded by other numerics,
// per backend (a plug-in's name holds dots and slashes), and nothing when there are none.
TEST(NumericsId, TheGateSummaryNamesTheApproveCommand) {
  replay::GateResult g;
  replay::GateCase a;
  a.suite = "replay.golden.plugin:/opt/k/libk.so";
  a.name = "t.h5";
  a.path = "/fx/t.h5";
  a.other_numerics = true;
  replay::GateCase b = a;
  b.suite = "replay.golden.reference";
  b.other_numerics = false;
  g.cases = {a, b};
  const std::string s = g.summary();
  EXPECT_NE(s.find("1 golden trace(s) recorded by plugin:/opt/k/libk.so with other numerics"), std::string::npos) << s;
  EXPECT_NE(s.find("ssmcheck approve --backend plugin:/opt/k/libk.so /fx/t.h5\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("--backend reference"), std::string::npos) << s;
  EXPECT_TRUE(g.json()["cases"][0]["other_numerics"].get<bool>());
  g.cases = {b};
  EXPECT_EQ(g.summary().find("ssmcheck approve"), std::string::npos);
}

// The digest follows the sources and the headers they include, and nothing else
// (cmake/numerics_digest.cmake run on a small tree).
TEST(NumericsDigest, FollowsTheIncludesOfTheSourcesAndNothingElse) {
  test::TempDir d("ssmcheck-digest");
  fs::create_directories(d.file("k"));
  auto put = [&](const std::string& name, const std::string& text) { std::ofstream(d.file(name)) << text; };
  put("k/a.cu", "#include \"k/b.cuh\"\n__global__ void f() {}\n");
  put("k/b.cuh", "#include \"c.h\"  // next to b.cuh\nconst int kB = 1;\n");
  put("k/c.h", "const int kC = 2;\n");
  put("k/unrelated.h", "const int kU = 3;\n");
  auto digest = [&](const std::string& extra) {
    const std::string out = d.file("out.cpp");
    const auto r =
        sh("cmake -DNAME=kernels -DOUT=" + q(out) + " -DROOT=" + q(d.path()) + " -DSOURCES=k/a.cu '-DEXTRA=" + extra +
           "' -P " + q(std::string(SSMCHECK_SOURCE_DIR) + "/cmake/numerics_digest.cmake"));
    EXPECT_EQ(r.code, 0) << r.out;
    const std::string text = test::file_bytes(out);
    const size_t at = text.find("return \"");
    EXPECT_NE(at, std::string::npos) << text;
    EXPECT_NE(text.find("// 3 files"), std::string::npos) << text;  // a.cu, b.cuh, c.h
    return text.substr(at + 8, 16);
  };
  const std::string d0 = digest("nvcc 12.4 -O3");
  EXPECT_EQ(d0.size(), 16u);
  EXPECT_EQ(digest("nvcc 12.4 -O3"), d0);  // deterministic
  put("k/unrelated.h", "const int kU = 4;\n");
  EXPECT_EQ(digest("nvcc 12.4 -O3"), d0) << "a header nothing includes is not numerics";
  put("k/c.h", "const int kC = 2;  // a comment counts: the digest is conservative\n");
  const std::string d1 = digest("nvcc 12.4 -O3");
  EXPECT_NE(d1, d0) << "a header included transitively is";
  EXPECT_NE(digest("nvcc 12.4 -O2"), d1) << "so are the flags";
}

}  // namespace
}  // namespace ssm
