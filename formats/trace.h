// State traces (HDF5): a model with its weights and pool, a sequence of ops with their
// per-token inputs, and, after any subset of ops, recorded states (some or all sequences and
// layers) and outputs. Schema: docs/trace-format.md. Counterparts: formats/trace.cpp (writer,
// validating reader), capture/ssmcheck_capture.h (the C ABI over TraceWriter), replay/ (replay
// and the gate), python/examples/write_trace.py (the same files from Python, ssmcheck.TraceWriter).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/model.h"
#include "core/op.h"
#include "core/state.h"
#include "formats/file_version.h"
#include "formats/format_error.h"

namespace ssm::formats {

constexpr int kTraceVersion = 1;  // what this build writes
// What it reads: every version ever written (formats/file_version.h: what keeps and what bumps it).
constexpr FileVersions kTraceVersions{1, kTraceVersion};
constexpr const char* kTraceFormat = "ssmcheck-trace";

// Any problem with a trace is a FormatError (formats/format_error.h): "FILE: OBJECT: what",
// OBJECT an HDF5 path ("/ops/000003/state/seq0/layer1/h", "/model/layer0@nk"), or "/" for the
// file itself.

// Where a deliberately faulty trace must first diverge (root attributes expect_*).
struct TraceExpectation {
  int op = -1;
  int seq = -1;    // -1: any
  int layer = -1;  // -1: not about one layer
  std::string tensor;  // as cmp::Where::tensor: "h", "conv_checkpoint", "h_intermediate[1]", "output", ...
  std::string text() const;  // "op 5, seq 0, layer 1, h"
};

// The recorded state of one logical sequence after an op. `layers` names the model layers
// recorded (ascending, at least one); state.layers holds them in that order. h_prefill_stage is
// optional even in f16-pool mode (not compared when absent). state.slot: the producer's slot.
struct TraceState {
  int seq = 0;
  std::vector<int> layers;
  SequenceState state;
};

struct TraceHeader {
  std::string producer;      // who wrote the file: "ssmcheck record", an engine's name
  int64_t version = kTraceVersion;  // the file's @version (read: any of kTraceVersions; written: kTraceVersion)
  std::string tool_version;  // filled by the writer when empty
  std::string backend;       // what produced the recorded states: "reference", "cuda", "vllm-0.9"
  // The build that produced them (formats::build_id() for ssmcheck's own backends; an engine may
  // write its own). Replaying on the same backend and build is bitwise by default.
  std::string build;
  uint64_t seed = 0;         // informational
  std::string case_name;     // informational: the flags that regenerate the trace
  std::string description;   // informational
  Model model;               // spec and weights
  PoolConfig pool;           // h mode and capacities the ops ran with
  std::optional<TraceExpectation> expect;
  // Optional (/start): the trace starts from these states instead of an empty pool, each sequence
  // in its pool slot (TraceState::state.slot, required here), every layer: a trace cut out of a
  // longer one (`ssmcheck reduce`, replay/reduce.h). Ascending seq, distinct slots.
  std::vector<TraceState> start;
};

struct TraceOp {
  Op op;
  std::optional<ErrorKind> refused;  // the producer's backend refused the op with this kind
  // One per selector entry (op.seqs) for prefill/decode/verify, rows = op.rows(); empty for
  // other ops. An entry with rows == 0 has no recorded inputs (allowed for padding entries and
  // refused ops only): replay feeds zeros.
  std::vector<StepInputs> inputs;
  // Empty, or one per selector entry (nullopt: not recorded). Padding entries are never compared.
  std::vector<std::optional<StepOutputs>> outputs;
  std::vector<TraceState> states;  // ascending seq, distinct
  // An asynchronous capture's drop policy left this op's states out (@states_dropped = 1): its
  // states are absent because the capture could not keep up, not because the engine chose so.
  bool states_dropped = false;
};

struct Trace {
  TraceHeader header;
  std::vector<TraceOp> ops;
  std::string source;     // the path that was read (a file or a PATH.partial directory)
  bool finished = true;   // false: an unfinished capture (PATH.partial/)
  std::string note;       // for an unfinished capture: where it ends
};

// Checks one op against the header: selector, inputs (shapes, finite), outputs (shapes),
// states (layers, shapes, dtypes, counts; non-finite values allowed: they are evidence).
// Throws FormatError naming `file` and the op's object path.
void validate_trace_op(const TraceHeader& header, const TraceOp& op, int index, const std::string& file);
void validate_trace_header(const TraceHeader& header, const std::string& file);

// "ops/000003": the group of op `index` (six digits at least).
std::string trace_op_name(int index);
// The directory an unfinished capture of PATH lives in: PATH.partial
std::string trace_partial_dir(const std::string& path);

// Crash-safe writer. The capture lives in PATH.partial/ as self-contained files: header.h5,
// then one op-NNNNNN.h5 per op, each written under a temporary name, fsync'ed and renamed, so an
// op is durable once append() returns. close() merges everything into PATH (by the outputs rule
// of formats/output_file.h: a temporary renamed into place, a device written through) and removes
// the directory. A writer destroyed without close() (or a crashed process)
// leaves PATH.partial/, which read_trace recovers up to the last complete op. A new writer of the
// same PATH never deletes such an unfinished capture: it moves it aside to PATH.partial.N (the
// first free N), still readable by read_trace, and says where (moved_aside()).
// One writer per trace: a writer holds an exclusive flock(2) on its PATH.partial directory until
// close() or its destruction; a second writer of the same PATH while the first lives is refused
// (FormatError naming PATH and the live capture's directory), across processes and within one.
// The kernel drops the lock of a process that died, so a crashed capture is moved aside as above.
// A TraceWriter is not shared by threads (the C ABI serialises its handle: capture/capture.cpp).
class TraceWriter {
 public:
  TraceWriter(const std::string& path, const TraceHeader& header);  // throws FormatError
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void append(const TraceOp& op);  // validates, then writes; throws FormatError
  void close();                    // throws FormatError; the partial directory stays on failure
  int ops() const { return count_; }
  const std::string& path() const { return path_; }
  const TraceHeader& header() const { return header_; }
  // Where an unfinished capture of the same path was moved ("" when there was none).
  const std::string& moved_aside() const { return moved_aside_; }

 private:
  std::string path_, dir_, moved_aside_;
  TraceHeader header_;
  int lock_fd_ = -1;  // the open PATH.partial directory, flock'ed exclusively (-1: none)
  int count_ = 0;
  bool closed_ = false;
};

// Writes a whole trace at once (TraceWriter underneath).
void write_trace(const std::string& path, const TraceHeader& header, const std::vector<TraceOp>& ops);

// Reads a finished trace (a file) or an unfinished capture (a PATH.partial directory, also
// looked up when PATH does not exist). Validates everything and never crashes on a malformed
// file: throws FormatError naming the file and object. Holds every op in memory: replay and
// reduce stream instead (open_trace); this is for small traces and tests.
Trace read_trace(const std::string& path);

// What a replay needs of every op before it reads any op's data: the op, its recorded refusal and
// which states it recorded (for start points, replay/start_point.h). About 110 bytes an op.
struct TraceStateHead {
  int seq = 0;
  int layers = 0;      // how many layers are recorded
  bool stage = false;  // h_prefill_stage recorded
};
struct TraceOpHead {
  Op op;
  std::optional<ErrorKind> refused;
  std::vector<TraceStateHead> states;  // ascending seq
};
TraceOpHead head_of(const TraceOp& op);

// A trace read one op at a time: the header and the ops' heads are held, an op's inputs, outputs
// and states only while it is the current one, so a replay holds the live state plus one op,
// whatever the trace's length (issue 44 item 5; docs/trace-format.md "Scaling").
class TraceSource {
 public:
  virtual ~TraceSource() = default;
  TraceHeader header;              // mutable: replay may override the layers' numerics (--gates, convention hints)
  std::vector<TraceOpHead> heads;  // one per op
  std::string source;              // as Trace::source
  bool finished = true;            // as Trace::finished
  std::string note;                // as Trace::note
  size_t size() const { return heads.size(); }
  // Op `i` with its data; the reference stays valid until the next call. Throws FormatError.
  virtual const TraceOp& op(size_t i) = 0;
};

// A Trace already in memory as a TraceSource (it must outlive the source).
class MemoryTrace : public TraceSource {
 public:
  explicit MemoryTrace(const Trace& trace);
  const TraceOp& op(size_t i) override { return trace_->ops.at(i); }

 private:
  const Trace* trace_;
};

// Opens a trace as read_trace does (a file or an unfinished capture, with the same errors, the
// same crash containment and the same recovery of an unfinished capture), but reads only the
// header and the ops' heads now (first in a child process, formats/crash_probe.h): op(i) reads op
// i from the file, validated. The ops' data are read and validated once in a child a chunk of
// 4,096 ops at a time, when the chunk's first op is asked for, so a malformed op is reported (a
// FormatError from op()) before any op of its chunk is used, and a replay from op 10^6 - 10 reads
// a few ops, not the trace. Before Dec 6 every op was probed at open.
std::unique_ptr<TraceSource> open_trace(const std::string& path);

}  // namespace ssm::formats
