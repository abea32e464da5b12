// The hostile-input campaign (issue 14): corrupted traces and dumps (seeded byte flips across the
// whole file, truncations), malformed op scripts and flags, fed to the ssmcheck binary. Every case
// must end with exit 0, 1 or 2 (a flip in bytes nothing reads, a changed value that the
// comparison catches, or a refusal), never a signal or a hang; a refusal names the file; and the
// output is printable text, even when the file's strings are not. Reads run first in a child
// (formats/crash_probe.h), so a corruption that crashes libhdf5 is a refusal too: the probe
// itself is tested on a read that segfaults.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

#include "capture/ssmcheck_capture.h"
#include "formats/crash_probe.h"
#include "formats/hdf5_file.h"
#include "plugin/host_wire.h"
#include "tests/support/campaign_env.h"
#include "tests/support/shell.h"
#include "tests/support/file_bytes.h"

namespace ssm {
namespace {

using test::q;
using test::sh;
using test::Shell;
using test::TempDir;

const std::string kBin = SSMCHECK_BIN;

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
           " exit 1, " + std::to_string(refused) + " exit 2 (" + std::to_string(contained) +
           " libhdf5 crashes contained)";
  }
};

// One corrupted file through one command: exit 0/1/2 only (timeout: 124), printable output, and a
// refusal that names the file.
void judge(const std::string& cmd, const std::string& file, const std::string& what, Tally& t) {
  const Shell s = sh("timeout 60 " + cmd);
  ++t.cases;
  SCOPED_TRACE(what + ": " + cmd);
  ASSERT_TRUE(s.code == 0 || s.code == 1 || s.code == 2) << "exit " << s.code << " (a signal, a hang or a crash)\n"
                                                         << s.out;
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
  const std::string bytes = test::file_bytes(good);
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
  ASSERT_EQ(
      sh(kBin + " record --preset tiny --layers 1 --states all --outputs --ops " + q(script) + " -o " + q(*trace)).code,
      0);
  ASSERT_EQ(sh(kBin + " dump --preset tiny --layers 1 --ops " + q(script) + " -o " + q(*dump)).code, 0);
}

TEST(HostileInput, CorruptedTracesAndDumpsAreRefusedNeverCrash) {
  const uint64_t seed = test::campaign_seed(14);
  TempDir dir("ssmcheck-hostile-src");
  std::string trace, dump;
  good_files(dir, "alloc; prefill 3; checkpoint; verify 3; commit 2 3; alloc @1; decode @0,1", &trace, &dump);
  Tally t;
  corrupt_campaign(trace, "trace.h5", kBin + " replay", int(test::env_u64("SSMCHECK_CASES", 120)), seed, t);
  corrupt_campaign(dump, "dump.h5", kBin + " diff " + q(dump), int(test::env_u64("SSMCHECK_CASES", 120)) / 2, seed + 1,
                   t);
  std::printf("hostile files: %s\n", t.text().c_str());
  EXPECT_GE(t.cases, 60);
  EXPECT_GT(t.refused, 0);
}

// Structure-aware corruptions (tests/support/corrupt_h5.py, h5py): every attribute deleted or set
// to a huge, negative, NaN or wrongly typed value, every dataset deleted, reshaped, retyped or
// filled with NaN; a seeded sample of them for a trace and a dump.
void structured_campaign(const std::string& good, const std::string& cmd_prefix, int max, uint64_t seed, Tally& t) {
  TempDir dir("ssmcheck-structured");
  const Shell gen = sh("/usr/bin/python3 " + std::string(SSMCHECK_SOURCE_DIR) + "/tests/support/corrupt_h5.py " +
                       q(good) + " " + q(dir.path()) + " " + std::to_string(seed) + " " + std::to_string(max));
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
    EXPECT_NE(s.out.find(names), std::string::npos) << cmd << ": the message does not name '" << names << "':\n"
                                                    << s.out;
    EXPECT_TRUE(printable(s.out)) << s.out;
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs that cost too much or say too little (issue 42 item 4): each is refused at once, exit 2,
// naming the key, flag, field or call and the bound. Commands that could allocate run under
// `ulimit -v` (kLowMemory), so a regression is a quick std::bad_alloc, never the OOM killer.

const std::string kLowMemory = "ulimit -v 4194304 && ";  // 4 GiB of address space, or nothing runs

// Runs `cmd` (timeout 60 s; after `ulimit -v` with low_memory) and expects exit 2 with a printable
// message naming each of `names`.
void expect_refusal(const std::string& cmd, const std::vector<std::string>& names, bool low_memory = false) {
  const Shell s = sh((low_memory ? kLowMemory : std::string()) + "timeout 60 " + cmd);
  EXPECT_EQ(s.code, 2) << cmd << "\n" << s.out;
  for (const std::string& n : names)
    EXPECT_NE(s.out.find(n), std::string::npos) << cmd << ": the message does not name '" << n << "':\n" << s.out;
  EXPECT_TRUE(printable(s.out)) << s.out;
  EXPECT_EQ(s.out.find("bad_alloc"), std::string::npos) << cmd << "\n" << s.out;
}

std::string gdn_config(const std::string& layers_json) {
  return R"({"model_type": "qwen3_next", )" + layers_json +
         R"(, "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 8,
              "linear_value_head_dim": 12, "linear_conv_kernel_dim": 4})";
}

// A 250-byte config.json declaring 2^20 layers ran for hours (the layer list was rebuilt in the
// loop condition, O(n^2)); now a layer count past 4096 (what a dump or trace holds) is refused,
// naming the key, and the largest allowed config is read at once.
TEST(HostileInput, AConfigDeclaringAMillionLayersIsRefusedAtOnce) {
  TempDir dir("ssmcheck-hostile-config");
  spit(dir.file("big.json"), gdn_config(R"("num_hidden_layers": 1048576, "full_attention_interval": 4)"));
  ASSERT_LT(test::file_bytes(dir.file("big.json")).size(), 300u);
  expect_refusal(kBin + " run --config " + q(dir.file("big.json")) + " --ops alloc",
                 {"big.json", "'num_hidden_layers' is 1048576", "4096"});
  // a layer_types list of 5000 entries (no num_hidden_layers to compare it with)
  std::string types;
  for (int i = 0; i < 5000; ++i) types += std::string(i ? ", " : "") + "\"linear_attention\"";
  spit(dir.file("list.json"), gdn_config("\"layer_types\": [" + types + "]"));
  expect_refusal(kBin + " run --config " + q(dir.file("list.json")) + " --ops alloc",
                 {"list.json", "'layer_types' has 5000 entries", "4096"});
  // the bound itself: 4096 layers, 3072 of them recurrent, read in well under the timeout
  spit(dir.file("max.json"), gdn_config(R"("num_hidden_layers": 4096, "full_attention_interval": 4)"));
  const Shell ok = sh("timeout 20 " + kBin + " run --config " + q(dir.file("max.json")) + " --layers 3072 --ops alloc");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("3072"), std::string::npos) << ok.out;
}

// --slots 2000000000 built a capacity list of 8 GB (std::bad_alloc, or minutes of work); every
// pool flag is checked against core/model.h's bounds first, naming the flag and the bound. A model
// whose weights and one sequence's state exceed the memory this process can use is refused
// before anything is allocated, naming the model and the limit.
TEST(HostileInput, PoolFlagsAndHugeModelsAreRefusedBeforeAllocating) {
  const std::string run = kBin + " run --preset tiny ";
  expect_refusal(run + "--slots 2000000000 --ops alloc", {"--slots 2000000000", "1..65536"}, true);
  expect_refusal(run + "--snapshots 2000000000 --ops alloc", {"--snapshots 2000000000", "0..65536"}, true);
  expect_refusal(run + "--conv-capacity 2000000000 --ops alloc", {"--conv-capacity 2000000000", "0..65536"}, true);
  expect_refusal(run + "--capacity 4,2000000000 --slots 2 --ops alloc", {"--capacity 2000000000", "0..65536"}, true);
  TempDir dir("ssmcheck-hostile-huge");
  // 3072 layers of 32768 value heads of 256 x 256: 25 TiB of state
  spit(dir.file("huge.json"),
       R"({"model_type": "qwen3_next", "num_hidden_layers": 4096, "full_attention_interval": 4,
           "linear_num_key_heads": 1, "linear_num_value_heads": 32768, "linear_key_head_dim": 256,
           "linear_value_head_dim": 256, "linear_conv_kernel_dim": 4})");
  expect_refusal(kBin + " run --config " + q(dir.file("huge.json")) + " --ops alloc",
                 {"--config " + dir.file("huge.json"), "GiB", "more than the memory this process can use"}, true);
  expect_refusal(kBin + " run --config " + q(dir.file("huge.json")) + " --layers 1 --ops alloc",
                 {"--layers 1", "GiB", "ulimit -v"}, true);
}

// Replaces dataset `name` of group `g` by one of `dims` f32 elements whose storage is never
// allocated (it reads as zeros: a file of kilobytes declaring gigabytes), with the attributes a
// dump's dataset has.
void declare_dataset(hid_t g, const std::string& name, const std::vector<hsize_t>& dims, const std::string& layout) {
  ASSERT_GE(H5Ldelete(g, name.c_str(), H5P_DEFAULT), 0) << name;
  const hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
  const hid_t d = H5Dcreate2(g, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0) << name;
  h5::write_attr_str(d, "dtype", "f32");
  h5::write_attr_str(d, "layout", layout);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void set_int_attr(hid_t g, const char* name, int64_t v) {
  ASSERT_GE(H5Adelete(g, name), 0) << name;
  h5::write_attr_i64(g, name, v);
}

// A dump of a few kilobytes declaring a layer of 2^31 h elements (8 GiB) read the whole of it
// into memory: std::bad_alloc. The reader now sizes what the file asks for from its geometry and
// refuses more than the process can use, naming the object and the limit.
TEST(HostileInput, ADumpDeclaringAHugeLayerIsRefusedBeforeReadingIt) {
  TempDir dir("ssmcheck-hostile-hugedump");
  const std::string path = dir.file("huge.h5");
  ASSERT_EQ(sh(kBin + " dump --preset tiny --layers 1 --ops 'alloc; prefill 3' -o " + q(path)).code, 0);
  {
    h5::silence_errors();
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t m = H5Gopen2(f, "/model/layer0", H5P_DEFAULT);
    set_int_attr(m, "nk", 1);
    set_int_attr(m, "nv", 32768);
    set_int_attr(m, "kd", 256);
    set_int_attr(m, "vd", 256);
    H5Gclose(m);
    const hid_t l = H5Gopen2(f, "/seq0/layer0", H5P_DEFAULT);
    declare_dataset(l, "h", {32768, 256, 256}, "[nv][kd][vd], vd fastest");
    declare_dataset(l, "conv", {2 * 256 + 32768 * 256, 4}, "[conv_dim][d_conv], column 0 oldest");
    H5Gclose(l);
    ASSERT_GE(H5Fclose(f), 0);
  }
  ASSERT_LT(test::file_bytes(path).size(), size_t(1) << 20);
  expect_refusal(kBin + " diff " + q(path) + " " + q(path),
                 {path, "/model", "GiB", "more than the memory this process can use", "ulimit -v"}, true);
}

// A layer count past the model's ran the model's layers with exit 0: every command taking
// --layers says how many the model has.
TEST(HostileInput, LayersBeyondTheModelAreExitTwo) {
  TempDir dir("ssmcheck-hostile-layers");
  const std::string tail = " --preset tiny --layers 99 --ops 'alloc; prefill 2'";
  expect_refusal(kBin + " run" + tail, {"--layers 99", "tiny has 2 recurrent layers"});
  expect_refusal(kBin + " dump" + tail + " -o " + q(dir.file("d.h5")), {"--layers 99", "tiny has 2 recurrent layers"});
  expect_refusal(kBin + " record" + tail + " -o " + q(dir.file("t.h5")),
                 {"--layers 99", "tiny has 2 recurrent layers"});
  expect_refusal(kBin + " check --backend reference" + tail, {"--layers 99", "tiny has 2 recurrent layers"});
  expect_refusal(kBin + " fuzz --preset tiny --layers 99 --cases 1", {"--layers 99", "tiny has 2 recurrent layers"});
  expect_refusal(kBin + " run --preset odd-c --layers 2 --ops alloc", {"--layers 2", "odd-c has 1 recurrent layers"});
  expect_refusal(kBin + " run --layers -1 --ops alloc", {"--layers -1"});
  spit(dir.file("c.json"), gdn_config(R"("num_hidden_layers": 4, "full_attention_interval": 4)"));
  expect_refusal(kBin + " run --config " + q(dir.file("c.json")) + " --layers 4 --ops alloc",
                 {"--layers 4", dir.file("c.json"), "has 3 recurrent layers"});
  expect_refusal(kBin + " fuzz --config " + q(dir.file("c.json")) + " --layers 4 --cases 1",
                 {"--layers 4", "has 3 recurrent layers"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("d.h5")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.h5")));
  // the model's own count still runs
  EXPECT_EQ(sh(kBin + " run --preset tiny --layers 2 --ops alloc").code, 0);
}

// --value-scale nan ran (exit 1 on NaN outputs), --decay nan failed naming a weight: every floating
// case flag refuses NaN and infinities itself, naming the flag.
TEST(HostileInput, NonFiniteFloatFlagsAreExitTwoNamingTheFlag) {
  for (const char* flag : {"--decay", "--value-scale"})
    for (const char* v : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e999"})
      for (const std::string& cmd : {kBin + " run", kBin + " check --backend reference"})
        expect_refusal(cmd + " --preset tiny " + flag + " " + v + " --ops 'alloc; prefill 2'", {flag});
}

// Counts the non-overlapping occurrences of `needle` in `s`.
size_t count_of(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
  return n;
}

// A 2 MB op text came back twice in full through ssmc_last_error(): the capture library quotes an
// op once, its first 200 characters and its size, and bounds every message.
TEST(HostileInput, TheCaptureLibraryQuotesALongOpOnceAndBounded) {
  TempDir dir("ssmcheck-hostile-capture");
  ssmc_trace* t = nullptr;
  ASSERT_EQ(ssmc_open(dir.file("c.h5").c_str(), "hostile", "hostile", "m", "f32", &t), SSMC_OK) << ssmc_last_error();
  ASSERT_EQ(ssmc_set_pool(t, 2, nullptr, 2, 1), SSMC_OK) << ssmc_last_error();
  const int nk = 1, nv = 2, kd = 8, vd = 12, dc = 4, conv_dim = 2 * nk * kd + nv * vd;
  const std::vector<float> conv_w(size_t(conv_dim * dc), 0.1f), a_log(nv, -1.0f), dt_bias(nv, 0.0f), norm_w(vd, 1.0f);
  const ssmc_layer_desc d = {nk, nv, kd, vd, dc, 0, 0, 1e-6f};
  ASSERT_EQ(ssmc_add_layer(t, &d, conv_w.data(), nullptr, a_log.data(), dt_bias.data(), norm_w.data()), SSMC_OK)
      << ssmc_last_error();
  const std::string word(size_t(2) << 20, 'x');                           // an unknown op of 2 MB
  const std::string arg = "decode " + std::string(size_t(2) << 20, '7');  // an argument of 2 MB
  for (const std::string& op : {word, arg}) {
    EXPECT_EQ(ssmc_begin_op(t, op.c_str()), SSMC_ERR_ARGUMENT);
    const std::string e = ssmc_last_error();
    EXPECT_LT(e.size(), 1000u) << e.substr(0, 1000);
    EXPECT_EQ(count_of(e, op.substr(0, 200)), 1u) << e.substr(0, 1000);  // quoted once
    EXPECT_NE(e.find("(" + std::to_string(op.size()) + " bytes)"), std::string::npos) << e.substr(0, 1000);
    EXPECT_NE(e.find("ssmc_begin_op"), std::string::npos) << e.substr(0, 1000);
    EXPECT_NE(e.find(op.size() == word.size() ? "unknown op" : "not a count"), std::string::npos) << e.substr(0, 1000);
  }
  // a short op is quoted whole, as before
  EXPECT_EQ(ssmc_begin_op(t, "frobnicate 3"), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("op 'frobnicate 3': unknown op 'frobnicate'"), std::string::npos)
      << ssmc_last_error();
  // the capture goes on: a good op after the refused ones
  EXPECT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK) << ssmc_last_error();
  ssmc_abandon(t);
}

// Writes `value` over element `index` of the f32 dataset `obj` of the dump at `path`.
void poke_f32(const std::string& path, const std::string& obj, hsize_t index, float value) {
  h5::silence_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, obj.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << obj;
  const hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), at(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  for (int k = rank; k-- > 0;) {
    at[size_t(k)] = index % dims[size_t(k)];
    index /= dims[size_t(k)];
  }
  H5Sselect_elements(space, H5S_SELECT_SET, 1, at.data());
  const hsize_t one = 1;
  const hid_t mem = H5Screate_simple(1, &one, nullptr);
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &value), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  ASSERT_GE(H5Fclose(f), 0);
}

// The elements of the FP16 dataset `obj` that are inf or NaN (exponent bits all set).
size_t count_f16_non_finite(const std::string& path, const std::string& obj) {
  h5::silence_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 0;
  const hid_t d = H5Dopen2(f, obj.c_str(), H5P_DEFAULT);
  size_t n = 0;
  if (d >= 0) {
    const hid_t space = H5Dget_space(d);
    std::vector<uint16_t> bits(size_t(H5Sget_simple_extent_npoints(space)));
    const hid_t type = H5Dget_type(d);
    if (H5Tget_size(type) == 2 && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0)
      for (uint16_t b : bits) n += (b & 0x7c00) == 0x7c00;
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(d);
  }
  H5Fclose(f);
  return n;
}

// ssmcheck diff refused ssmcheck's own f16-mode dumps whose FP16 h overflowed to inf (the
// converter, an f16_store inf layer: a state the contract allows): the reader accepts non-finite
// values in the h-like fields of the FP16 h modes and still refuses them anywhere else.
TEST(HostileInput, DumpsOfTheFp16ModesMayHoldInfInTheirHFields) {
  TempDir dir("ssmcheck-hostile-inf");
  const std::string dump = kBin + " dump --preset tiny --layers 1 --value-scale 1e8 --decay 0 ";
  const std::string pool = dir.file("pool.h5"), store = dir.file("store.h5"), f32 = dir.file("f32.h5");
  // f16-pool: the narrow after the prefill overflows to inf
  ASSERT_EQ(sh(dump + "--h-mode f16-pool --ops 'alloc; prefill 4' -o " + q(pool)).code, 0);
  // f16 with triton's stores: inf and NaN stay in FP16 h
  ASSERT_EQ(sh(dump + "--h-mode f16 --f16-store inf --ops 'alloc; prefill 4; decode' -o " + q(store)).code, 0);
  for (const std::string& p : {pool, store}) {
    const Shell s = sh(kBin + " diff " + q(p) + " " + q(p));
    EXPECT_EQ(s.code, 0) << s.out;
    EXPECT_EQ(s.out.find("non-finite"), std::string::npos) << s.out;
  }
  // ssmcheck's own dumps hold what the contract allows (else this test proves nothing): FP16 inf
  EXPECT_GT(count_f16_non_finite(pool, "/seq0/layer0/h"), 0u);
  EXPECT_GT(count_f16_non_finite(store, "/seq0/layer0/h"), 0u);
  EXPECT_EQ(sh(kBin + " diff --bitwise " + q(pool) + " " + q(pool)).code, 0);
  // ... where the contract has no non-finite value, still refused, naming the field
  const std::string conv = dir.file("conv.h5");
  std::filesystem::copy_file(pool, conv);
  poke_f32(conv, "/seq0/layer0/conv", 5, std::nanf(""));
  expect_refusal(kBin + " diff " + q(conv) + " " + q(conv), {conv, "/seq0/layer0/conv", "non-finite value nan"});
  ASSERT_EQ(sh(kBin + " dump --preset tiny --layers 1 --ops 'alloc; prefill 4' -o " + q(f32)).code, 0);
  poke_f32(f32, "/seq0/layer0/h", 7, INFINITY);
  expect_refusal(kBin + " diff " + q(f32) + " " + q(f32), {f32, "/seq0/layer0/h", "non-finite value inf"});
  // --allow-non-finite still lets them through to the comparison
  EXPECT_NE(sh(kBin + " diff --allow-non-finite " + q(f32) + " " + q(f32)).code, 2);
}

// fuzz --out named a failing case by its seed alone, so a second campaign with the same seed
// replaced the first's evidence: the files are named by seed and case, and a name already taken
// gets the next numeric suffix.
TEST(HostileInput, ASecondCampaignWithTheSameSeedKeepsTheFirstsEvidence) {
  TempDir dir("ssmcheck-hostile-out");
  const std::string out = dir.file("out");
  const std::string fuzz = "SSMCHECK_MUTANT=alt_commit_off_by_one " + std::string(SSMCHECK_MUTANTS_BIN) +
                           " fuzz --cases 3000 --seed 3 --max-ops 30 --out " + q(out);
  const Shell first = sh(fuzz);
  ASSERT_EQ(first.code, 1) << first.out;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(out)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names, (std::vector<std::string>{"case-seed3-case20.model.h5", "case-seed3-case20.sut.h5",
                                             "case-seed3-case20.txt"}));
  // the first campaign's evidence, marked, must survive the second
  spit(out + "/case-seed3-case20.txt", test::file_bytes(out + "/case-seed3-case20.txt") + "# the first campaign\n");
  const std::string model = test::file_bytes(out + "/case-seed3-case20.model.h5");
  const Shell second = sh(fuzz);
  ASSERT_EQ(second.code, 1) << second.out;
  EXPECT_NE(second.out.find("case-seed3-case20-2.txt"), std::string::npos) << second.out;
  EXPECT_NE(test::file_bytes(out + "/case-seed3-case20.txt").find("# the first campaign"), std::string::npos);
  EXPECT_EQ(test::file_bytes(out + "/case-seed3-case20.model.h5"), model);
  for (const char* f : {"case-seed3-case20-2.model.h5", "case-seed3-case20-2.sut.h5", "case-seed3-case20-2.txt"})
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  // a name taken by anything (here a symlink to nowhere) is skipped too
  ASSERT_EQ(::symlink("/nonexistent", (out + "/case-seed3-case20-3.sut.h5").c_str()), 0);
  ASSERT_EQ(sh(fuzz).code, 1);
  EXPECT_TRUE(std::filesystem::exists(out + "/case-seed3-case20-4.txt"));
  EXPECT_TRUE(std::filesystem::is_symlink(out + "/case-seed3-case20-3.sut.h5"));
}

// The plug-in wire (plugin/host_wire.h): frame headers past kMaxJson / kMaxArrays were already
// refused before anything is read (check_header); an arena the peer announces but its file does
// not hold was mapped, and reading it faults (SIGBUS). Both are WireErrors naming the sizes.
TEST(HostileInput, APeerAnnouncingMoreThanItSentIsAWireError) {
  namespace wire = plugin::wire;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const uint64_t header[3] = {uint64_t(1) << 33, 0, 0};  // 8 GiB of JSON, no arrays, arena 0
  ASSERT_EQ(::write(sv[0], header, sizeof header), ssize_t(sizeof header));
  wire::Frame f;
  try {
    wire::read_frame(sv[1], &f);
    ADD_FAILURE() << "a frame announcing 2^33 bytes of JSON was read";
  } catch (const wire::WireError& e) {
    EXPECT_NE(std::string(e.what()).find("8589934592 bytes of JSON"), std::string::npos) << e.what();
  }
  ::close(sv[0]);
  ::close(sv[1]);
  wire::Arena a = wire::Arena::create();  // an empty file
  try {
    a.follow(uint64_t(1) << 33);
    ADD_FAILURE() << "an arena of 2^33 bytes that the file does not hold was mapped";
    return;  // (writing into it would fault: SIGBUS)
  } catch (const wire::WireError& e) {
    EXPECT_NE(std::string(e.what()).find("8589934592 bytes, but the shared file holds 0"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(a.size(), 0u);
  EXPECT_THROW(a.follow(uint64_t(1) << 40), wire::WireError);  // past kMaxArena
  // what the file holds is followed as before
  const std::vector<char> bytes(1 << 16, 'a');
  const auto at = a.put({{bytes.data(), bytes.size()}});
  EXPECT_NO_THROW(a.follow(a.size()));
  EXPECT_EQ(a.at(at[0].first, bytes.size(), "array")[100], 'a');
}

// The probe turns a read that crashes into a message, and lets a read that throws or succeeds be.
TEST(HostileInput, ACrashingReadIsContainedInTheProbe) {
  EXPECT_EQ(formats::crash_probe([] { std::raise(SIGSEGV); }), "reading it crashed libhdf5 (SIGSEGV)");
  EXPECT_EQ(formats::crash_probe([] { std::abort(); }), "reading it crashed libhdf5 (SIGABRT)");
  EXPECT_EQ(formats::crash_probe([] { throw std::runtime_error("a normal error"); }), "");
  EXPECT_EQ(formats::crash_probe([] {}), "");
}

}  // namespace
}  // namespace ssm
