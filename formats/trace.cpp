// State traces: the crash-safe writer (PATH.partial/ of self-contained files, merged on close)
// and the validating reader (see trace.h; schema in docs/trace-format.md).
// Recorded states use the dump's per-sequence layout: formats/dump.h's validate_sequence,
// write_sequence_group and read_sequence_group, so the layout and its validation live in
// dump.cpp only.
#include "formats/trace.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fmt/core.h>
#include <set>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "formats/crash_probe.h"
#include "formats/checked_file.h"
#include "formats/dump.h"
#include "formats/hdf5_file.h"
#include "formats/model_attrs.h"

namespace ssm::formats {

namespace fs = std::filesystem;

std::string TraceExpectation::text() const {
  std::string s = fmt::format("op {}", op);
  if (seq >= 0) s += fmt::format(", seq {}", seq);
  if (layer >= 0) s += fmt::format(", layer {}", layer);
  if (!tensor.empty()) s += ", " + tensor;
  return s;
}

std::string trace_op_name(int index) { return fmt::format("ops/{:06d}", index); }
std::string trace_partial_dir(const std::string& path) { return path + ".partial"; }

namespace {

std::string op_path(int index) { return "/" + trace_op_name(index); }
std::string layer_name(size_t l) { return "layer" + std::to_string(l); }
std::string entry_name(size_t i) { return "entry" + std::to_string(i); }
std::string ple_output_name(size_t l) { return "ple_layer" + std::to_string(l); }

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}


// The names of a group's members, in name order, in one pass over the group (H5Literate): asking
// for each name by index is quadratic on the symbol-table groups HDF5 1.10 writes (a 10^5-op
// trace took 414 s to list).
std::vector<std::string> children(hid_t g) {
  H5G_info_t info;
  h5::check(H5Gget_info(g, &info), "H5Gget_info");
  if (info.nlinks > 10000000) throw h5::Error("group has too many members (" + std::to_string(info.nlinks) + ")");
  std::vector<std::string> names;
  names.reserve(size_t(info.nlinks));
  struct Collect {
    static herr_t add(hid_t, const char* name, const H5L_info_t*, void* out) {
      if (!name || std::strlen(name) > 4096) return -1;
      static_cast<std::vector<std::string>*>(out)->emplace_back(name);
      return 0;
    }
  };
  hsize_t idx = 0;
  if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, &Collect::add, &names) < 0)
    throw h5::Error("unreadable member names: " + h5::error_stack());
  return names;
}

// "layer12" -> 12; -1 when `name` is not prefix + a plain decimal number.
long numbered(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 9) return -1;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  if (name.size() > prefix.size() + 1 && name[prefix.size()] == '0') return -1;  // no leading zeros
  return std::stol(name.substr(prefix.size()));
}

int64_t first_non_finite(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return int64_t(i);
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Validation.

void check_rows(const std::string& file, const std::string& obj, const std::vector<float>& v, size_t rows,
                size_t width, bool finite) {
  if (v.size() != rows * width)
    throw FormatError(file, obj, fmt::format("{} values, expected {} = {} rows x {}", v.size(), rows * width, rows, width));
  if (finite) {
    const int64_t i = first_non_finite(v);
    if (i >= 0)
      throw FormatError(file, obj, fmt::format("non-finite value {} at ({}, {})", v[size_t(i)], size_t(i) / width,
                                               size_t(i) % width));
  }
}

void check_inputs(const TraceHeader& h, const StepInputs& in, int rows, const std::string& file,
                  const std::string& obj) {
  if (in.rows != rows) throw FormatError(file, obj, fmt::format("{} rows, the op takes {}", in.rows, rows));
  if (in.layers.size() != h.model.spec.layers.size())
    throw FormatError(file, obj, fmt::format("{} layers, the model has {}", in.layers.size(), h.model.spec.layers.size()));
  for (size_t l = 0; l < in.layers.size(); ++l) {
    const LayerSpec& s = h.model.spec.layers[l];
    const LayerRows& r = in.layers[l];
    const std::string lp = obj + "/" + layer_name(l);
    for (const InputField& f : s.inputs())
      check_rows(file, lp + "/" + f.name, r.*f.member, size_t(rows), size_t(f.width), true);
  }
  try {
    check_ple_tokens(h.model.spec, in);
  } catch (const std::invalid_argument& e) {
    throw FormatError(file, obj, e.what());
  }
}

void check_state(const TraceHeader& h, const TraceState& ts, const std::string& file, const std::string& obj) {
  const size_t L = h.model.spec.layers.size();
  if (ts.layers.empty()) throw FormatError(file, obj, "no layer recorded");
  for (size_t j = 0; j < ts.layers.size(); ++j) {
    if (ts.layers[j] < 0 || size_t(ts.layers[j]) >= L)
      throw FormatError(file, obj, fmt::format("layer {} outside the model's 0..{}", ts.layers[j], L - 1));
    if (j && ts.layers[j] <= ts.layers[j - 1]) throw FormatError(file, obj, "recorded layers must be ascending and distinct");
  }
  if (ts.state.layers.size() != ts.layers.size())
    throw FormatError(file, obj, fmt::format("{} layer states for {} recorded layers", ts.state.layers.size(),
                                             ts.layers.size()));
  validate_sequence(ts.state, file, obj, h.model.spec, h.pool.h_mode, ts.layers, /*stage_optional=*/true,
                    /*check_finite=*/false);
}

}  // namespace

void validate_trace_header(const TraceHeader& h, const std::string& file) {
  try {
    h.model.validate();
  } catch (const std::exception& e) {
    throw FormatError(file, "/model", e.what());
  }
  try {
    h.pool.validate();
  } catch (const std::exception& e) {
    throw FormatError(file, "/pool", e.what());
  }
  if (h.expect && h.expect->op < 0) throw FormatError(file, "/@expect_op", "negative");
  std::set<int> seqs, slots;
  for (const TraceState& ts : h.start) {
    const std::string sp = "/start/seq" + std::to_string(ts.seq);
    if (ts.seq < 0) throw FormatError(file, sp, "negative sequence");
    if (!seqs.insert(ts.seq).second) throw FormatError(file, sp, "sequence given twice");
    if (ts.state.slot < 0 || ts.state.slot >= h.pool.max_slots || !slots.insert(ts.state.slot).second)
      throw FormatError(
          file, sp + "@slot",
          fmt::format("{}: a start state needs its own pool slot in 0..{}", ts.state.slot, h.pool.max_slots - 1));
    if (ts.layers.size() != h.model.spec.layers.size())
      throw FormatError(file, sp,
                        fmt::format("{} of the {} layers: a start state holds every layer", ts.layers.size(),
                                    h.model.spec.layers.size()));
    check_state(h, ts, file, sp);
  }
}

void validate_trace_op(const TraceHeader& h, const TraceOp& t, int index, const std::string& file) {
  const std::string op = op_path(index);
  const Op& o = t.op;
  if (o.seqs.empty()) throw FormatError(file, op + "@op", "empty selector");
  try {
    if (!(parse_op(to_string(o)) == o)) throw std::invalid_argument("does not print back to itself");
  } catch (const std::exception& e) {
    throw FormatError(file, op + "@op", e.what());
  }
  const int rows = o.rows();
  const bool takes_inputs = o.takes_inputs();
  if (!takes_inputs && !t.inputs.empty()) throw FormatError(file, op + "/inputs", "present for an op without inputs");
  if (takes_inputs) {
    if (t.inputs.size() != o.seqs.size())
      throw FormatError(file, op + "/inputs", fmt::format("{} entries for a selector of {}", t.inputs.size(), o.seqs.size()));
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      const std::string ep = op + "/inputs/" + entry_name(i);
      const StepInputs& in = t.inputs[i];
      if (in.layers.empty()) {
        if (rows > 0 && o.seqs[i] != kPadRow && !t.refused)
          throw FormatError(file, ep, "missing (only padding entries and refused ops may omit inputs)");
        continue;
      }
      check_inputs(h, in, rows, file, ep);
    }
  }
  if (t.states_dropped && !t.states.empty())
    throw FormatError(file, op + "@states_dropped", "set, but the op has states");
  if (!t.outputs.empty()) {
    if (!takes_inputs) throw FormatError(file, op + "/outputs", "present for an op without outputs");
    if (t.refused) throw FormatError(file, op + "/outputs", "present for a refused op");
    if (t.outputs.size() != o.seqs.size())
      throw FormatError(file, op + "/outputs", fmt::format("{} entries for a selector of {}", t.outputs.size(), o.seqs.size()));
    for (size_t i = 0; i < t.outputs.size(); ++i) {
      if (!t.outputs[i]) continue;
      const StepOutputs& out = *t.outputs[i];
      const std::string ep = op + "/outputs/" + entry_name(i);
      if (out.rows != rows) throw FormatError(file, ep, fmt::format("{} rows, the op makes {}", out.rows, rows));
      if (out.layers.size() != h.model.spec.layers.size())
        throw FormatError(file, ep, fmt::format("{} layers, the model has {}", out.layers.size(), h.model.spec.layers.size()));
      for (size_t l = 0; l < out.layers.size(); ++l)
        check_rows(file, ep + "/" + layer_name(l), out.layers[l], size_t(rows),
                   size_t(h.model.spec.layers[l].out_dim()), false);
      // the PLE outputs: one entry per layer, [rows][C] on a layer hosting a carry, empty elsewhere
      if ((!out.ple.empty() || h.model.spec.hosts_ple()) && out.ple.size() != out.layers.size())
        throw FormatError(file, ep, fmt::format("{} PLE output layers, the model has {}", out.ple.size(), out.layers.size()));
      for (size_t l = 0; l < out.ple.size(); ++l)
        check_rows(file, ep + "/" + ple_output_name(l), out.ple[l], size_t(rows),
                   size_t(h.model.spec.layers[l].ple.channels), false);
    }
  }
  std::set<int> seen;
  for (const TraceState& s : t.states) {
    const std::string sp = op + "/state/seq" + std::to_string(s.seq);
    if (s.seq < 0) throw FormatError(file, sp, "negative sequence");
    if (!seen.insert(s.seq).second) throw FormatError(file, sp, "sequence recorded twice");
    check_state(h, s, file, sp);
  }
}

// ---------------------------------------------------------------------------------------------
// Writer.

namespace {

void write_header(hid_t f, const TraceHeader& h, int ops) {
  h5::write_attr_str(f, "format", kTraceFormat);
  h5::write_attr_i64(f, "version", kTraceVersion);
  h5::write_attr_str(f, "producer", h.producer);
  h5::write_attr_str(f, "tool_version", h.tool_version.empty() ? tool_version() : h.tool_version);
  h5::write_attr_str(f, "backend", h.backend);
  if (!h.build.empty()) h5::write_attr_str(f, "build", h.build);
  h5::write_attr_u64(f, "seed", h.seed);
  h5::write_attr_str(f, "case", h.case_name);
  h5::write_attr_str(f, "description", h.description);
  h5::write_attr_str(f, "h_mode", to_string(h.pool.h_mode));
  if (ops >= 0) h5::write_attr_i64(f, "ops", ops);
  if (h.expect) {
    h5::write_attr_i64(f, "expect_op", h.expect->op);
    h5::write_attr_i64(f, "expect_seq", h.expect->seq);
    h5::write_attr_i64(f, "expect_layer", h.expect->layer);
    h5::write_attr_str(f, "expect_tensor", h.expect->tensor);
  }
  {
    h5::Handle pg = h5::create_group(f, "pool");
    write_pool_attrs(pg, h.pool);
  }
  h5::Handle mg = h5::create_group(f, "model");
  h5::write_attr_str(mg, "name", h.model.spec.name);
  if (!h.model.spec.source.empty()) h5::write_attr_str(mg, "source", h.model.spec.source);
  h5::write_attr_i64(mg, "layers", int64_t(h.model.spec.layers.size()));
  for (size_t l = 0; l < h.model.spec.layers.size(); ++l) {
    const LayerSpec& s = h.model.spec.layers[l];
    const LayerWeights& w = h.model.weights[l];
    h5::Handle lg = h5::create_group(mg, layer_name(l));
    write_layer_spec_attrs(lg, s);
    for (const WeightField& f : s.weights()) h5::write_dataset(lg, f.name, DType::f32, f.shape, (w.*f.member).data());
  }
  if (!h.start.empty()) {  // the states the trace starts from (TraceHeader::start)
    h5::Handle sg = h5::create_group(f, "start");
    for (const TraceState& ts : h.start)
      write_sequence_group(sg, "seq" + std::to_string(ts.seq), ts.seq, ts.state, ts.layers, h.model.spec);
  }
}

void write_f32(hid_t loc, const std::string& name, const std::vector<float>& v, int64_t rows, int64_t width) {
  h5::write_dataset(loc, name, DType::f32, {rows, width}, v.data());
}

void write_op(hid_t ops_group, int index, const TraceOp& t, const TraceHeader& h) {
  const std::string name = fmt::format("{:06d}", index);
  h5::Handle og = h5::create_group(ops_group, name);
  h5::write_attr_str(og, "op", to_string(t.op));
  if (t.refused) h5::write_attr_str(og, "refused", to_string(*t.refused));
  if (t.states_dropped) h5::write_attr_i64(og, "states_dropped", 1);
  const ModelSpec& spec = h.model.spec;
  if (!t.inputs.empty()) {
    h5::Handle ig = h5::create_group(og, "inputs");
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      const StepInputs& in = t.inputs[i];
      if (in.layers.empty()) continue;
      h5::Handle eg = h5::create_group(ig, entry_name(i));
      for (size_t l = 0; l < in.layers.size(); ++l) {
        const LayerSpec& s = spec.layers[l];
        h5::Handle lg = h5::create_group(eg, layer_name(l));
        for (const InputField& f : s.inputs()) write_f32(lg, f.name, in.layers[l].*f.member, in.rows, f.width);
      }
    }
  }
  if (!t.outputs.empty()) {
    h5::Handle outg = h5::create_group(og, "outputs");
    for (size_t i = 0; i < t.outputs.size(); ++i) {
      if (!t.outputs[i]) continue;
      h5::Handle eg = h5::create_group(outg, entry_name(i));
      for (size_t l = 0; l < t.outputs[i]->layers.size(); ++l) {
        write_f32(eg, layer_name(l), t.outputs[i]->layers[l], t.outputs[i]->rows, spec.layers[l].out_dim());
        if (spec.layers[l].ple.hosted())
          write_f32(eg, ple_output_name(l), t.outputs[i]->ple[l], t.outputs[i]->rows, spec.layers[l].ple.channels);
      }
    }
  }
  if (!t.states.empty()) {
    h5::Handle sg = h5::create_group(og, "state");
    for (const TraceState& s : t.states)
      write_sequence_group(sg, "seq" + std::to_string(s.seq), s.seq, s.state, s.layers, spec);
  }
}

std::string op_file(const std::string& dir, int index) { return fmt::format("{}/op-{:06d}.h5", dir, index); }

}  // namespace

namespace {

// An exclusive, non-blocking flock(2) on the directory `dir`: its open descriptor, or -1 when
// another open file description holds the lock (a live writer, in this process or another).
int lock_dir(const std::string& dir, const std::string& path) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw FormatError(path, "/", "cannot open " + dir + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  const int e = errno;
  ::close(fd);
  if (e == EWOULDBLOCK) return -1;
  throw FormatError(path, "/", "cannot lock " + dir + ": " + std::strerror(e));
}

std::string live_capture(const std::string& dir) {
  return "another capture of this path is live (its writer holds the lock on " + dir +
         "): one writer per trace; close or abandon it first, or capture to another path";
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header)
    : path_(path), dir_(trace_partial_dir(path)), header_(header) {
  h5::silence_errors();
  validate_trace_header(header_, path_);
  if (header_.tool_version.empty()) header_.tool_version = tool_version();
  std::error_code ec;
  const fs::path parent = fs::path(dir_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw FormatError(path_, "/", "cannot create " + parent.string() + ": " + ec.message());
  // The new capture's directory is made, locked and given its header under a private name, then
  // renamed into place: a PATH.partial is never seen unlocked while its writer lives.
  std::string fresh = dir_ + ".new-XXXXXX";
  if (!::mkdtemp(fresh.data())) throw FormatError(path_, "/", "cannot create " + fresh + ": " + std::strerror(errno));
  try {
    lock_fd_ = lock_dir(fresh, path_);
    write_atomically(fresh + "/header.h5", "/", [&](hid_t f) { write_header(f, header_, -1); });
    if (fs::exists(dir_, ec)) {
      // an unfinished capture of the same path: live (its writer holds the lock) is refused; crashed
      // (the kernel dropped its lock) keeps the ops crash safety exists to keep: moved aside, never deleted
      const int other = lock_dir(dir_, path_);
      if (other < 0) throw FormatError(path_, "/", live_capture(dir_));
      for (int n = 1; moved_aside_.empty(); ++n) {
        const std::string aside = dir_ + "." + std::to_string(n);
        if (fs::exists(aside, ec)) continue;
        fs::rename(dir_, aside, ec);
        if (ec) {
          ::close(other);
          throw FormatError(path_, "/", "cannot move the unfinished capture " + dir_ + " aside: " + ec.message());
        }
        moved_aside_ = aside;
      }
      ::close(other);
    }
    if (::rename(fresh.c_str(), dir_.c_str()) != 0) {
      const int e = errno;  // a writer of the same path that started at the same time won the race
      if (e == ENOTEMPTY || e == EEXIST) throw FormatError(path_, "/", live_capture(dir_));
      throw FormatError(path_, "/", "cannot rename " + fresh + " to " + dir_ + ": " + std::strerror(e));
    }
  } catch (...) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    lock_fd_ = -1;
    fs::remove_all(fresh, ec);
    throw;
  }
}

// without close(): the partial directory stays (recoverable), and its lock goes with the descriptor
TraceWriter::~TraceWriter() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void TraceWriter::append(const TraceOp& op) {
  if (closed_) throw FormatError(path_, "/", "append after close");
  validate_trace_op(header_, op, count_, path_);
  write_atomically(op_file(dir_, count_), op_path(count_), [&](hid_t f) {
    h5::Handle ops = h5::create_group(f, "ops");
    write_op(ops, count_, op, header_);
  });
  ++count_;
}

void TraceWriter::close() {
  if (closed_) return;
  // the merge adds count_ groups to one file. A bounded metadata cache keeps its memory flat (HDF5's
  // adaptive cache grew with them to its 32 MiB cap: 60 MiB at the peak at 2,004 ops, 79 at 10,008;
  // with this one 48 and 50), and so does closing and reopening the file every kMergePart ops: the
  // free-space manager of an open file keeps in memory every fragment the merge frees, about 1.1 KB
  // an op with a state after every op (docs/trace-format.md "Scaling",
  // TraceBounded.RecordMemoryDoesNotGrowWithTheTrace).
  constexpr int kMergePart = 1024;
  const int parts = std::max(1, (count_ + kMergePart - 1) / kMergePart);
  write_atomically_in_parts(path_, "/", parts, [&](hid_t f, int part) {
    h5::bound_metadata_cache(f, size_t(1) << 20);
    if (part == 0) write_header(f, header_, count_);
    h5::Handle ops = part == 0 ? h5::create_group(f, "ops") : h5::open_group(f, "ops");
    for (int i = part * kMergePart; i < std::min(count_, (part + 1) * kMergePart); ++i) {
      h5::Handle src = h5::open_file(op_file(dir_, i));
      const std::string name = trace_op_name(i);
      h5::check(H5Ocopy(src, name.c_str(), ops, name.substr(4).c_str(), H5P_DEFAULT, H5P_DEFAULT), "copy " + name);
    }
  });
  closed_ = true;
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void write_trace(const std::string& path, const TraceHeader& header, const std::vector<TraceOp>& ops) {
  TraceWriter w(path, header);
  for (const TraceOp& op : ops) w.append(op);
  w.close();
}

// ---------------------------------------------------------------------------------------------
// Reader.

namespace {

class Reader : public CheckedReader {
 public:
  explicit Reader(std::string file) : CheckedReader(std::move(file)) {}

  // Where each op goes as it is read: into Trace::ops (read_trace), or dropped (open_trace's checks).
  using Sink = std::function<void(TraceOp&&)>;

  // A finished trace file: its header, and its op count (checked against /ops).
  int64_t read_file_header(hid_t f, TraceHeader& h) {
    h = read_header(f);
    const int64_t n = int_attr(f, "/", "ops", 0, INT32_MAX);
    h5::Handle ops = group(f, "/", "ops", /*required=*/n > 0);
    if (ops.id() >= 0) {
      // counted, not listed: listing a dense group of 10^6 links (HDF5 sorts them by name) took
      // half the time of reading the ops' heads; with the count right, reading op 0..n-1 by name
      // (every head is read) finds any member that is not an op
      H5G_info_t info;
      if (H5Gget_info(ops, &info) < 0) throw FormatError(file_, "/ops", "unreadable group info: " + h5::error_stack());
      if (int64_t(info.nlinks) != n)
        throw FormatError(file_, "/ops", fmt::format("{} members, the root attribute ops says {}", info.nlinks, n));
    }
    return n;
  }

  // A finished trace file.
  Trace read_file(const Sink& sink) {
    h5::Handle f = open("trace");
    Trace t;
    t.source = file_;
    const int64_t n = read_file_header(f, t.header);
    for (int64_t i = 0; i < n; ++i) sink(read_op(f, int(i), t.header));
    return t;
  }

  // An unfinished capture: header.h5 and op-NNNNNN.h5 up to the first missing one. `recovered`:
  // how many ops it recovers.
  Trace read_partial(const std::string& dir, const Sink& sink, size_t* recovered = nullptr) {
    Trace t;
    t.source = dir;
    t.finished = false;
    const std::string hf = dir + "/header.h5";
    if (!fs::exists(hf)) throw FormatError(dir, "/", "unfinished capture without header.h5 (it crashed before any op)");
    {
      Reader hr(hf);
      h5::Handle f = hr.open("trace");
      t.header = hr.read_header(f);
    }
    // the op files present, by index: op-NNNNNN.h5
    std::set<long> present;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.size() == 12 && n.rfind("op-", 0) == 0 && n.compare(9, 3, ".h5") == 0 &&
          n.substr(3, 6).find_first_not_of("0123456789") == std::string::npos)
        present.insert(std::stol(n.substr(3, 6)));
    }
    const long last = present.empty() ? -1 : *present.rbegin();
    std::string lost;  // why recovery stopped before the last op file, if it did
    size_t count = 0;
    std::string last_text;  // the last recovered op
    for (long i = 0; i <= last; ++i) {
      const std::string of = op_file(dir, int(i));
      if (!present.count(i)) {
        lost = fmt::format("WARNING: {} is missing while {} later op file(s) exist: those ops are not replayed",
                           fs::path(of).filename().string(), std::distance(present.upper_bound(i), present.end()));
        break;
      }
      try {
        Reader orr(of);
        h5::Handle f = orr.open("trace");
        TraceOp op = orr.read_op(f, int(i), t.header);
        last_text = to_string(op.op);
        ++count;
        sink(std::move(op));
      } catch (const FormatError& e) {
        if (i != last) throw;  // a damaged op file in the middle is a damaged trace
        lost = fmt::format("the last op file, {}, is incomplete (the capture died while writing it) and is not "
                           "recovered: {}", fs::path(of).filename().string(), e.what());
        break;
      }
    }
    t.note = count == 0 ? "capture did not finish: 0 ops recovered (it ended before the first op was flushed)"
                        : fmt::format("capture did not finish: {} ops recovered, the trace ends after op {} '{}'",
                                      count, count - 1, last_text);
    if (!lost.empty()) t.note += "; " + lost;
    if (recovered) *recovered = count;
    return t;
  }

 private:
  // Members of a group that are not in `allowed` (names or prefixes ending in '*') are errors:
  // a misspelt name must not be silently ignored.
  void only(hid_t g, const std::string& path, const std::vector<std::string>& allowed) {
    for (const std::string& n : guard(path, [&] { return children(g); })) {
      bool ok = false;
      for (const std::string& a : allowed)
        ok = ok || (a.back() == '*' ? n.rfind(a.substr(0, a.size() - 1), 0) == 0 : n == a);
      if (!ok) throw FormatError(file_, join(path, n), "unexpected member");
    }
  }

  // An f32 dataset of exactly `shape`.
  std::vector<float> floats(hid_t loc, const std::string& path, const std::string& name,
                            const std::vector<int64_t>& shape, bool finite) {
    const std::string full = join(path, name);
    if (!exists(loc, path, name)) throw FormatError(file_, full, "missing dataset");
    h5::Handle d = guard(full, [&] { return h5::open_if(loc, name, H5I_DATASET); });
    if (d.id() < 0) throw FormatError(file_, full, "is not a dataset");
    only_attrs(*this, d, full, {});  // weights, inputs and outputs carry none
    const h5::DatasetInfo info = guard(full, [&] { return h5::dataset_info(d); });
    if (!info.is_f32) throw FormatError(file_, full, "stored as " + info.type_text + ", expected IEEE float32");
    if (info.dims != shape)
      throw FormatError(file_, full, "shape " + dims_text(info.dims) + ", expected " + dims_text(shape));
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(size_t(n), 0.0f);
    if (n > 0) guard(full, [&] {
        h5::read_dataset(d, DType::f32, v.data());
        return 0;
      });
    if (finite) {
      const int64_t i = first_non_finite(v);
      if (i >= 0) {
        const int64_t w = shape.size() == 2 ? shape[1] : n;
        throw FormatError(file_, full, fmt::format("non-finite value {} at ({}, {})", v[size_t(i)], i / w, i % w));
      }
    }
    return v;
  }

 public:
  TraceHeader read_header(hid_t f) {
    const int64_t version = check_format(f, kTraceFormat, kTraceVersions);
    only_attrs(*this, f, "/",
               {"format", "version", "producer", "h_mode", "ops", "backend", "build", "tool_version", "case",
                "description", "seed", "expect_op", "expect_seq", "expect_layer", "expect_tensor"});
    TraceHeader h;
    h.version = version;  // version 1 is the only one yet: its members are read below
    h.producer = str_attr(f, "/", "producer");
    h.tool_version = opt_str_attr(f, "/", "tool_version");
    h.backend = opt_str_attr(f, "/", "backend");
    h.build = opt_str_attr(f, "/", "build");
    if (has_attr(f, "/", "seed")) h.seed = guard("/@seed", [&] { return h5::read_attr_u64(f, "seed"); });
    h.case_name = opt_str_attr(f, "/", "case");
    h.description = opt_str_attr(f, "/", "description");
    h.pool.h_mode = read_h_mode_attr(*this, f);
    if (has_attr(f, "/", "expect_op")) {
      TraceExpectation x;
      x.op = int(int_attr(f, "/", "expect_op", 0, INT32_MAX));
      if (has_attr(f, "/", "expect_seq")) x.seq = int(int_attr(f, "/", "expect_seq", -1, INT32_MAX));
      if (has_attr(f, "/", "expect_layer")) x.layer = int(int_attr(f, "/", "expect_layer", -1, kMaxLayers));
      x.tensor = opt_str_attr(f, "/", "expect_tensor");
      h.expect = x;
    }
    read_pool(f, h.pool);
    read_model(f, h.model);
    read_start(f, h);
    validate_trace_header(h, file_);
    return h;
  }

  // /start (optional): the states the trace starts from, every layer of each sequence.
  void read_start(hid_t f, TraceHeader& h) {
    h5::Handle sg = group(f, "/", "start", false);
    if (sg.id() < 0) return;
    std::vector<std::pair<long, std::string>> seqs;
    for (const std::string& n : guard("/start", [&] { return children(sg); })) {
      const long s = numbered(n, "seq");
      if (s < 0) throw FormatError(file_, "/start/" + n, "unexpected member (expected seqN, N a logical sequence)");
      seqs.emplace_back(s, n);
    }
    if (seqs.empty()) throw FormatError(file_, "/start", "no sequence (omit the group for an empty pool)");
    std::sort(seqs.begin(), seqs.end());
    for (const auto& s : seqs) h.start.push_back(read_state(sg, "/start", s.second, int(s.first), h));
  }

  void read_pool(hid_t f, PoolConfig& pool) {
    h5::Handle g = group(f, "/", "pool");
    read_pool_attrs(*this, g, pool);
  }

  void read_model(hid_t f, Model& m) {
    h5::Handle mg = group(f, "/", "model");
    only_attrs(*this, mg, "/model", {"layers", "name", "source"});
    m.spec.name = opt_str_attr(mg, "/model", "name");
    m.spec.source = opt_str_attr(mg, "/model", "source");
    const int64_t n = int_attr(mg, "/model", "layers", 1, kMaxLayers);
    only(mg, "/model", {"layer*"});
    for (int64_t l = 0; l < n; ++l) {
      const std::string lp = "/model/" + layer_name(size_t(l));
      h5::Handle lg = group(mg, "/model", layer_name(size_t(l)));
      const LayerSpec s = read_layer_spec_attrs(*this, lg, lp, /*output_gate_optional=*/true);
      const std::vector<WeightField> fields = s.weights();
      std::vector<std::string> names;
      for (const WeightField& f : fields) names.push_back(f.name);
      if (!s.conv_bias && exists(lg, lp, "conv_bias")) throw FormatError(file_, lp + "/conv_bias", "present but conv_bias is 0");
      only(lg, lp, names);
      LayerWeights w;
      for (const WeightField& f : fields) w.*f.member = floats(lg, lp, f.name, f.shape, true);
      m.spec.layers.push_back(s);
      m.weights.push_back(std::move(w));
    }
  }

  TraceOp read_op(hid_t f, int index, const TraceHeader& h) {
    const std::string op = op_path(index);
    h5::Handle og = group(f, "/", trace_op_name(index));
    TraceOp t;
    only_attrs(*this, og, op, {"op", "refused", "states_dropped"});
    if (has_attr(og, op, "states_dropped")) t.states_dropped = int_attr(og, op, "states_dropped", 1, 1) == 1;
    const std::string text = str_attr(og, op, "op");
    try {
      t.op = parse_op(text);
    } catch (const std::exception& e) {
      throw FormatError(file_, op + "@op", e.what());
    }
    if (has_attr(og, op, "refused")) {
      const std::string k = str_attr(og, op, "refused");
      const std::optional<ErrorKind> kind = parse_error_kind(k);
      if (!kind) throw FormatError(file_, op + "@refused", "unknown error kind '" + k + "' (known: " + known_error_kinds() + ")");
      t.refused = *kind;
    }
    only(og, op, {"inputs", "outputs", "state"});
    const ModelSpec& spec = h.model.spec;
    const int rows = t.op.rows();
    const bool takes_inputs = t.op.takes_inputs();
    const size_t entries = t.op.seqs.size();
    const int64_t L = int64_t(spec.layers.size());
    for (const LayerSpec& s : spec.layers)
      if (int64_t(rows) * s.conv_dim() > kMaxElems) throw FormatError(file_, op + "@op", "too many rows");
    h5::Handle ig = group(og, op, "inputs", false);
    if (ig.id() >= 0 && !takes_inputs) throw FormatError(file_, op + "/inputs", "present for an op without inputs");
    if (takes_inputs) {
      const std::string ip = op + "/inputs";
      if (ig.id() >= 0) only(ig, ip, {"entry*"});
      for (size_t i = 0; i < entries; ++i) {
        StepInputs in;
        if (ig.id() >= 0 && exists(ig, ip, entry_name(i)) && rows > 0) {
          const std::string ep = ip + "/" + entry_name(i);
          h5::Handle eg = group(ig, ip, entry_name(i));
          in.rows = rows;
          for (int64_t l = 0; l < L; ++l) {
            const LayerSpec& s = spec.layers[size_t(l)];
            const std::string lp = ep + "/" + layer_name(size_t(l));
            h5::Handle lg = group(eg, ep, layer_name(size_t(l)));
            const std::vector<InputField> fields = s.inputs();
            std::vector<std::string> names;
            for (const InputField& f : fields) names.push_back(f.name);
            only(lg, lp, names);
            LayerRows r;
            for (const InputField& f : fields) r.*f.member = floats(lg, lp, f.name, {rows, f.width}, true);
            in.layers.push_back(std::move(r));
          }
          only(eg, ep, {"layer*"});
          if (guard(ep, [&] { return children(eg); }).size() != size_t(L))
            throw FormatError(file_, ep, fmt::format("layers beyond the model's {}", L));
        }
        t.inputs.push_back(std::move(in));
      }
      if (ig.id() >= 0 && guard(ip, [&] { return children(ig); }).size() > entries)
        throw FormatError(file_, ip, fmt::format("entries beyond the selector's {}", entries));
    }
    h5::Handle outg = group(og, op, "outputs", false);
    if (outg.id() >= 0) {
      const std::string opp = op + "/outputs";
      if (!takes_inputs) throw FormatError(file_, opp, "present for an op without outputs");
      only(outg, opp, {"entry*"});
      if (guard(opp, [&] { return children(outg); }).size() > entries)
        throw FormatError(file_, opp, fmt::format("entries beyond the selector's {}", entries));
      for (size_t i = 0; i < entries; ++i) {
        if (!exists(outg, opp, entry_name(i))) {
          t.outputs.push_back(std::nullopt);
          continue;
        }
        const std::string ep = opp + "/" + entry_name(i);
        h5::Handle eg = group(outg, opp, entry_name(i));
        only(eg, ep, {"layer*", "ple_layer*"});
        StepOutputs out;
        out.rows = rows;
        size_t expected = size_t(L);
        for (int64_t l = 0; l < L; ++l) {
          const LayerSpec& s = spec.layers[size_t(l)];
          out.layers.push_back(floats(eg, ep, layer_name(size_t(l)), {rows, s.out_dim()}, false));
          out.ple.push_back(s.ple.hosted() ? floats(eg, ep, ple_output_name(size_t(l)), {rows, s.ple.channels}, false)
                                           : std::vector<float>{});
          expected += s.ple.hosted() ? 1 : 0;
        }
        if (guard(ep, [&] { return children(eg); }).size() != expected)
          throw FormatError(file_, ep, fmt::format("outputs beyond the model's {} layers and their PLE outputs", L));
        t.outputs.push_back(std::move(out));
      }
    }
    h5::Handle sg = group(og, op, "state", false);
    if (sg.id() >= 0) {
      const std::string sp = op + "/state";
      std::vector<std::pair<long, std::string>> seqs;
      for (const std::string& n : guard(sp, [&] { return children(sg); })) {
        const long s = numbered(n, "seq");
        if (s < 0) throw FormatError(file_, sp + "/" + n, "unexpected member (expected seqN, N a logical sequence)");
        seqs.emplace_back(s, n);
      }
      std::sort(seqs.begin(), seqs.end());
      for (const auto& s : seqs) t.states.push_back(read_state(sg, sp, s.second, int(s.first), h));
    }
    validate_trace_op(h, t, index, file_);
    return t;
  }

  // The head of op `index` (TraceOpHead): its attributes and which states it records, without
  // reading any dataset. For an op read_op has validated (open_trace checks every op first).
  TraceOpHead read_head(hid_t f, int index) {
    const std::string op = op_path(index);
    h5::Handle og = group(f, "/", trace_op_name(index));
    TraceOpHead t;
    try {
      t.op = parse_op(str_attr(og, op, "op"));
    } catch (const FormatError&) {
      throw;
    } catch (const std::exception& e) {
      throw FormatError(file_, op + "@op", e.what());
    }
    if (has_attr(og, op, "refused")) {
      const std::string k = str_attr(og, op, "refused");
      t.refused = parse_error_kind(k);
      if (!t.refused) throw FormatError(file_, op + "@refused", "unknown error kind '" + k + "'");
    }
    h5::Handle sg = group(og, op, "state", false);
    if (sg.id() < 0) return t;
    const std::string sp = op + "/state";
    for (const std::string& n : guard(sp, [&] { return children(sg); })) {
      TraceStateHead sh;
      sh.seq = int(numbered(n, "seq"));
      if (sh.seq < 0) throw FormatError(file_, sp + "/" + n, "unexpected member (expected seqN, N a logical sequence)");
      h5::Handle g = group(sg, sp, n);
      for (const std::string& m : guard(sp + "/" + n, [&] { return children(g); })) {
        if (m == "h_prefill_stage") sh.stage = true;
        else if (numbered(m, "layer") >= 0) ++sh.layers;
      }
      t.states.push_back(sh);
    }
    std::sort(t.states.begin(), t.states.end(),
              [](const TraceStateHead& a, const TraceStateHead& b) { return a.seq < b.seq; });
    return t;
  }

  // A recorded state: the members are checked here (layer<l> of the model, h_prefill_stage), the
  // rest by the dump's sequence-group reader.
  TraceState read_state(hid_t parent, const std::string& path, const std::string& name, int seq,
                        const TraceHeader& h) {
    const std::string obj = path + "/" + name;
    h5::Handle g = group(parent, path, name);
    TraceState ts;
    ts.seq = seq;
    for (const std::string& n : guard(obj, [&] { return children(g); })) {
      const long l = numbered(n, "layer");
      if (n == "h_prefill_stage") continue;
      if (l >= 0 && l < long(h.model.spec.layers.size())) {
        ts.layers.push_back(int(l));
      } else {
        throw FormatError(file_, obj + "/" + n,
                          l >= 0 ? fmt::format("layer {} beyond the model's {} layers", l, h.model.spec.layers.size())
                                 : "unexpected member (expected layerN or h_prefill_stage)");
      }
    }
    if (ts.layers.empty()) throw FormatError(file_, obj, "no layer recorded");
    std::sort(ts.layers.begin(), ts.layers.end());
    ReadOptions ro;
    ro.allow_non_finite = true;  // recorded values are evidence: replay reports them
    DumpSequence d =
        read_sequence_group(g, file_, obj, h.model.spec, h.pool.h_mode, ts.layers, /*stage_optional=*/true, ro);
    if (d.seq != seq) throw FormatError(file_, obj + "@seq", fmt::format("is {}, the group name says {}", d.seq, seq));
    ts.state = std::move(d.state);
    return ts;
  }
};

}  // namespace

namespace {

// Reads `path` as read_trace does, each op handed to `sink` as it is read. `recovered`: the ops of
// an unfinished capture that it recovers.
Trace read_trace_into(const std::string& path, const Reader::Sink& sink, size_t* recovered = nullptr) {
  return errors_as(path, "/", [&] {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return Reader(path).read_partial(path, sink, recovered);
    if (!fs::exists(path, ec) && fs::is_directory(trace_partial_dir(path), ec))
      return Reader(trace_partial_dir(path)).read_partial(trace_partial_dir(path), sink, recovered);
    return Reader(path).read_file(sink);
  });
}

Trace read_trace_unprobed(const std::string& path) {
  Trace t;
  Trace r = read_trace_into(path, [&](TraceOp&& op) { t.ops.push_back(std::move(op)); });
  r.ops = std::move(t.ops);
  return r;
}

// A trace file or unfinished capture read op by op (open_trace).
class FileTrace : public TraceSource {
 public:
  explicit FileTrace(const std::string& path) {
    std::error_code ec;
    const bool dir = fs::is_directory(path, ec);
    const bool partial = dir || (!fs::exists(path, ec) && fs::is_directory(trace_partial_dir(path), ec));
    size_t n = 0;
    if (partial) {
      // the ops it recovers (every op file up to a gap, the last one only if complete): found by
      // reading them once, one at a time, as read_trace does
      const Trace t = read_trace_into(
          path, [](TraceOp&&) {}, &n);
      header = t.header;
      source = t.source;
      finished = false;
      note = t.note;
      dir_ = source;
      for (size_t i = 0; i < n; ++i) {
        Reader r(op_file(dir_, int(i)));
        h5::Handle f = r.open("trace");
        heads.push_back(r.read_head(f, int(i)));
      }
    } else {
      reader_ = std::make_unique<Reader>(path);
      file_ = reader_->open("trace");
      source = path;
      n = size_t(reader_->read_file_header(file_, header));
      heads.reserve(n);
      for (size_t i = 0; i < n; ++i) heads.push_back(reader_->read_head(file_, int(i)));
    }
    file_header_ = header;
    // an unfinished capture's ops were all read above (in open_trace's probe first); a file's are
    // probed a chunk at a time, when one of the chunk's ops is first read
    probed_.assign((n + kProbeChunk - 1) / kProbeChunk, partial);
  }

  const TraceOp& op(size_t i) override {
    if (i >= heads.size()) throw FormatError(source, "/", fmt::format("no op {} (the trace has {})", i, heads.size()));
    if (!probed_[i / kProbeChunk]) probe_chunk(i / kProbeChunk);
    if (current_ != i) {
      current_ = size_t(-1);
      // read with the header as recorded (replay may override the numerics of `header`)
      op_ = errors_as(reader_ ? source : op_file(dir_, int(i)), "/", [&] {
        if (reader_) return reader_->read_op(file_, int(i), file_header_);
        Reader r(op_file(dir_, int(i)));
        h5::Handle f = r.open("trace");
        return r.read_op(f, int(i), file_header_);
      });
      current_ = i;
    }
    return op_;
  }

 private:
  // Reads ops of chunk c once in a child (formats/crash_probe.h) before any of them is read here:
  // a crash of libhdf5 on a damaged op is an error, and a malformed op is reported with its
  // message before the chunk's first op is used. Chunks, not the whole trace at open: `--from`,
  // `--bisect` and `reduce` read what they replay, a few ops of a 10^6-op trace.
  void probe_chunk(size_t c) {
    const size_t lo = c * kProbeChunk, hi = std::min(heads.size(), lo + kProbeChunk);
    const auto check = [&] {
      errors_as(source, "/", [&] {
        Reader r(source);
        h5::Handle f = r.open("trace");
        for (size_t k = lo; k < hi; ++k) (void)r.read_op(f, int(k), file_header_);
        return 0;
      });
    };
    bool threw = false;
    const std::string crash = crash_probe(check, &threw);
    if (!crash.empty()) throw FormatError(source, "/", crash + ": the file is corrupted");
    if (threw) check();  // the same error, here (the ops before it read fine in the child)
    probed_[c] = true;
  }

  static constexpr size_t kProbeChunk = 4096;  // ops probed in one child
  std::vector<bool> probed_;                   // per chunk of kProbeChunk ops
  std::unique_ptr<Reader> reader_;  // a finished trace: its file, open
  h5::Handle file_;
  std::string dir_;  // an unfinished capture: its directory
  TraceHeader file_header_;
  TraceOp op_;
  size_t current_ = size_t(-1);
};

}  // namespace

Trace read_trace(const std::string& path) {
  const std::string crash = crash_probe([&] { (void)read_trace_unprobed(path); });
  if (!crash.empty()) throw FormatError(path, "/", crash + ": the file is corrupted");
  return read_trace_unprobed(path);
}

TraceOpHead head_of(const TraceOp& op) {
  TraceOpHead h;
  h.op = op.op;
  h.refused = op.refused;
  for (const TraceState& s : op.states)
    h.states.push_back(TraceStateHead{s.seq, int(s.layers.size()), bool(s.state.h_prefill_stage)});
  return h;
}

MemoryTrace::MemoryTrace(const Trace& trace) : trace_(&trace) {
  header = trace.header;
  source = trace.source;
  finished = trace.finished;
  note = trace.note;
  heads.reserve(trace.ops.size());
  for (const TraceOp& op : trace.ops) heads.push_back(head_of(op));
}

std::unique_ptr<TraceSource> open_trace(const std::string& path) {
  // the header and the ops' heads read once in a child (an unfinished capture's ops too): a crash
  // of libhdf5 is an error; the ops' data are probed a chunk at a time as they are read (FileTrace)
  const auto check = [&] { errors_as(path, "/", [&] { return FileTrace(path).size(); }); };
  bool threw = false;
  const std::string crash = crash_probe(check, &threw);
  if (!crash.empty()) throw FormatError(path, "/", crash + ": the file is corrupted");
  if (threw) check();  // the same error, here (read_trace's message)
  return errors_as(path, "/", [&] { return std::unique_ptr<TraceSource>(std::make_unique<FileTrace>(path)); });
}

}  // namespace ssm::formats
