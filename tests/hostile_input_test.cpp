// The hostile-input campaign (issue 14): corrupted traces and dumps (seeded byte flips across the
// whole file, truncations), malformed op scripts and flags, fed to the ssmcheck binary. Every case
// must end with exit 0, 1 or 2 (a flip in bytes nothing reads, a changed value that the
// comparison catches, or a refusal), never a signal or a hang; a refusal names the file; and the
// output is printable text, even when the file's strings are not. Reads run first in a child
// (formats/crash_probe.h), so a corruption that crashes libhdf5 is a refusal too: the probe
// itself is tested on a read that segfaults.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <random>

#include "formats/crash_probe.h"
#include "tests/support/campaign_env.h"
#include "tests/support/shell.h"

namespace ssm {
namespace {

using test::q;
using test::sh;
using test::Shell;
using test::TempDir;

const std::string kBin = SSMCHECK_BIN;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// Valid UTF-8 without control characters other than newline and tab.
bool printable(const std::string& s) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = u[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
      ++i;
      continue;
    }
    const size_t len = (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((u[i + k] & 0xc0) != 0x80) return false;
    i += len;
  }
  return true;
}

struct Tally {
  int cases = 0, ok = 0, differ = 0, refused = 0, contained = 0;
  std::string text() const {
    return std::to_string(cases) + " cases: " + std::to_string(ok) + " exit 0, " + std::to_string(differ) +
           " exit 1, " + std::to_string(refused) + " exit 2 (" + std::to_string(contained) + " libhdf5 crashes contained)";
  }
};

// One corrupted file through one command: exit 0/1/2 only (timeout: 124), printable output, and a
// refusal that names the file.
void judge(const std::string& cmd, const std::string& file, const std::string& what, Tally& t) {
  const Shell s = sh("timeout 60 " + cmd);
  ++t.cases;
  SCOPED_TRACE(what + ": " + cmd);
  ASSERT_TRUE(s.code == 0 || s.code == 1 || s.code == 2) << "exit " << s.code << " (a signal, a hang or a crash)\n" << s.out;
  EXPECT_TRUE(printable(s.out)) << s.out;
  if (s.code == 2) {
    EXPECT_NE(s.out.find(file), std::string::npos) << "the refusal does not name " << file << ":\n" << s.out;
  }
  (s.code == 0 ? t.ok : s.code == 1 ? t.differ : t.refused)++;
  if (s.out.find("crashed libhdf5") != std::string::npos) ++t.contained;
}

// Seeded flips spread over the whole file (one per stripe) plus truncations at fixed fractions.
void corrupt_campaign(const std::string& good, const std::string& name, const std::string& cmd_prefix, int flips,
                      uint64_t seed, Tally& t) {
  TempDir dir("ssmcheck-hostile");
  const std::string bytes = slurp(good);
  ASSERT_GT(bytes.size(), 1000u);
  std::mt19937_64 rng(seed);
  const std::string bad = dir.file(name);
  const size_t stripe = bytes.size() / size_t(flips);
  for (int i = 0; i < flips; ++i) {
    std::string b = bytes;
    const size_t off = size_t(i) * stripe + rng() % stripe;
    b[off] = char(b[off] ^ (1 + rng() % 255));
    spit(bad, b);
    judge(cmd_prefix + " " + q(bad), name, "byte " + std::to_string(off) + " flipped", t);
  }
  for (double frac : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99}) {
    spit(bad, bytes.substr(0, size_t(double(bytes.size()) * frac)));
    judge(cmd_prefix + " " + q(bad), name, "truncated to " + std::to_string(frac), t);
  }
}

// A good trace (every state, the outputs) and a good dump of one small script, in `dir`.
void good_files(const TempDir& dir, const std::string& script, std::string* trace, std::string* dump) {
  *trace = dir.file("t.h5");
  *dump = dir.file("d.h5");
  ASSERT_EQ(sh(kBin + " record --preset tiny --layers 1 --states all --outputs --ops " + q(script) + " -o " + q(*trace)).code, 0);
  ASSERT_EQ(sh(kBin + " dump --preset tiny --layers 1 --ops " + q(script) + " -o " + q(*dump)).code, 0);
}

TEST(HostileInput, CorruptedTracesAndDumpsAreRefusedNeverCrash) {
  const uint64_t seed = test::campaign_seed(14);
  TempDir dir("ssmcheck-hostile-src");
  std::string trace, dump;
  good_files(dir, "alloc; prefill 3; checkpoint; verify 3; commit 2 3; alloc @1; decode @0,1", &trace, &dump);
  Tally t;
  corrupt_campaign(trace, "trace.h5", kBin + " replay", int(test::env_u64("SSMCHECK_CASES", 120)), seed, t);
  corrupt_campaign(dump, "dump.h5", kBin + " diff " + q(dump), int(test::env_u64("SSMCHECK_CASES", 120)) / 2, seed + 1, t);
  std::printf("hostile files: %s\n", t.text().c_str());
  EXPECT_GE(t.cases, 60);
  EXPECT_GT(t.refused, 0);
}

// Structure-aware corruptions (tests/support/corrupt_h5.py, h5py): every attribute deleted or set
// to a huge, negative, NaN or wrongly typed value, every dataset deleted, reshaped, retyped or
// filled with NaN; a seeded sample of them for a trace and a dump.
void structured_campaign(const std::string& good, const std::string& cmd_prefix, int max, uint64_t seed, Tally& t) {
  TempDir dir("ssmcheck-structured");
  const Shell gen = sh("/usr/bin/python3 " + std::string(SSMCHECK_SOURCE_DIR) + "/tests/support/corrupt_h5.py " + q(good) +
                       " " + q(dir.path()) + " " + std::to_string(seed) + " " + std::to_string(max));
  ASSERT_EQ(gen.code, 0) << gen.out;
  std::ifstream manifest(dir.file("manifest.tsv"));
  std::string line;
  int n = 0;
  while (std::getline(manifest, line)) {
    const std::string file = line.substr(0, line.find('\t')), what = line.substr(line.find('\t') + 1);
    judge(cmd_prefix + " " + q(dir.file(file)), file, what, t);
    ++n;
  }
  EXPECT_GE(n, max / 2) << "few corruptions were generated: " << gen.out;
}

TEST(HostileInput, StructureAwareCorruptionsAreRefusedNeverCrash) {
  if (sh("/usr/bin/python3 -c 'import h5py, numpy'").code != 0)
    GTEST_SKIP() << "python3-h5py / python3-numpy not installed (scripts/deps.sh installs them)";
  const uint64_t seed = test::campaign_seed(15);
  TempDir dir("ssmcheck-structured-src");
  std::string trace, dump;
  good_files(dir, "alloc; prefill 3; checkpoint; verify 3; commit 2 3", &trace, &dump);
  Tally t;
  const int max = int(test::env_u64("SSMCHECK_CASES", 200));
  structured_campaign(trace, kBin + " replay", max, seed, t);
  structured_campaign(dump, kBin + " diff " + q(dump), max / 2, seed + 1, t);
  std::printf("structure-aware corruptions: %s\n", t.text().c_str());
  EXPECT_GE(t.cases, (max + max / 2) / 2) << "fewer than half the corruptions asked for were made";
  EXPECT_GT(t.refused, t.cases / 2) << "most structural damage must be refused";
}

TEST(HostileInput, MalformedScriptsAndFlagsAreExitTwoWithTheReason) {
  const std::string run = kBin + " run --preset tiny --layers 1 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {run + "--ops 'verify'", "verify"},
      {run + "--ops 'commit a b'", "commit"},
      {run + "--ops 'prefill -1'", "prefill"},
      {run + "--ops 'alloc @x'", "@x"},
      {run + "--ops 'frobnicate 3'", "frobnicate"},
      {run + "--ops 'alloc; prefill 300000000'", "300000000 rows"},
      {run + "--ops @/nonexistent/script.txt", "/nonexistent/script.txt"},
      {kBin + " run --decay 7 --ops alloc", "--decay"},
      {kBin + " run --value-scale -1 --ops alloc", "--value-scale"},
      {kBin + " run --seed -3 --ops alloc", "--seed"},
      {kBin + " run --slots 0 --ops alloc", "slots"},
      {kBin + " run --h-mode f8 --ops alloc", "f8"},
      {kBin + " run --preset nope --ops alloc", "nope"},
      {kBin + " run --capacity 1,2 --slots 3 --ops alloc", "capacity"},
      {kBin + " run --slots 100000000 --ops alloc", "100000000"},
      {kBin + " fuzz --duration nan", "--duration"},
      {kBin + " fuzz --backend plugin:/nonexistent.so --cases 1", "/nonexistent.so"},
      {kBin + " replay /nonexistent/trace.h5", "/nonexistent/trace.h5"},
      {kBin + " diff /nonexistent/a.h5 /nonexistent/b.h5", "/nonexistent/a.h5"},
      {kBin + " replya", "did you mean 'replay'"},
  };
  for (const auto& [cmd, names] : cases) {
    const Shell s = sh("timeout 60 " + cmd);
    EXPECT_EQ(s.code, 2) << cmd << "\n" << s.out;
    EXPECT_NE(s.out.find(names), std::string::npos) << cmd << ": the message does not name '" << names << "':\n" << s.out;
    EXPECT_TRUE(printable(s.out)) << s.out;
  }
}

// The probe turns a read that crashes into a message, and lets a read that throws or succeeds be.
TEST(HostileInput, ACrashingReadIsContainedInTheProbe) {
  EXPECT_EQ(cmp::crash_probe([] { std::raise(SIGSEGV); }), "reading it crashed libhdf5 (SIGSEGV)");
  EXPECT_EQ(cmp::crash_probe([] { std::abort(); }), "reading it crashed libhdf5 (SIGABRT)");
  EXPECT_EQ(cmp::crash_probe([] { throw std::runtime_error("a normal error"); }), "");
  EXPECT_EQ(cmp::crash_probe([] {}), "");
}

}  // namespace
}  // namespace ssm
