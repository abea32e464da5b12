// `ssmcheck reduce TRACE -o MIN.h5`: a divergent trace cut and delta-debugged (replay/reduce.h) to
// the smallest standalone trace that still diverges on the backend in the same way; prints the
// reduction (ops, sequences, layers, bytes before and after), --json writes it.
#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include "cli/backend_registry.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/tolerance_options.h"
#include "formats/trace.h"
#include "formats/verdict_text.h"
#include "replay/reduce.h"

namespace ssm::cli {

namespace {

struct ReduceFlags {
  std::string trace, output, backend = "reference", json;
  bool bitwise = false, classes = false;
  int max_replays = 2000;
  ToleranceOptions tol;
};

// The bytes of a trace file, or of an unfinished capture's directory.
uint64_t bytes_of(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
  uint64_t n = 0;
  const std::string dir = fs::is_directory(path, ec) ? path : formats::trace_partial_dir(path);
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  return n;
}

int run_reduce(const ReduceFlags& f) {
  prepare_output_file(f.output, "-o");
  prepare_output_file(f.json, "--json");
  reserve_stdout_for(f.json);
  if (f.output == "-") throw std::invalid_argument("-o: the reduced trace is an HDF5 file, not for stdout");
  // a trace that cannot be read, at open or at an op reduce reached (formats::open_trace)
  auto bad_trace = [](const formats::FormatError& e) {
    fmt::print(stderr, "ssmcheck reduce: bad trace: {}\n", e.what());
    return kExitBadInput;
  };
  std::unique_ptr<formats::TraceSource> source;  // read op by op, as replay reads it
  try {
    source = formats::open_trace(f.trace);
  } catch (const formats::FormatError& e) {
    return bad_trace(e);
  }
  formats::TraceSource& trace = *source;
  const auto entry = find_backend(f.backend);
  auto backend = entry.make();
  replay::ReduceOptions o;
  o.replay.tolerances = f.tol.resolve();
  o.replay.strictness = f.bitwise ? cmp::Strictness::bitwise : cmp::Strictness::classes;
  o.replay.same_build_bitwise = !f.classes;
  o.max_replays = f.max_replays;
  fmt::print("ssmcheck reduce: {} ({} ops) on {}\n", trace.source, trace.size(), entry.name);
  replay::ReduceResult r;
  try {
    r = replay::reduce_trace(trace, *backend, o);
  } catch (const formats::FormatError& e) {
    return bad_trace(e);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "ssmcheck reduce: {}: on {}: {}\n", trace.source, entry.name, e.what());
    return kExitBadInput;
  }
  r.before.bytes = bytes_of(f.trace);
  if (r.diverged) {
    formats::write_trace(f.output, r.reduced.header, r.reduced.ops);
    r.after.bytes = bytes_of(f.output);
  }
  fmt::print("{}", r.text());
  if (r.diverged) fmt::print("wrote {}: rerun: ssmcheck replay {} --backend {}\n", f.output, f.output, entry.flag);
  if (!f.json.empty()) {
    nlohmann::json j = r.json();
    j["schema"] = "ssmcheck-reduce";
    j["trace"] = f.trace;
    j["output"] = r.diverged ? f.output : "";
    j["backend"] = entry.name;
    write_text_atomically(f.json, files::json_text(j) + "\n", "--json");
  }
  // 0: reduced (the output diverges as the input does); 5: the trace agrees, nothing to reduce
  return r.diverged ? kExitOk : kExitNothingRan;
}

}  // namespace

void add_reduce_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand(
      "reduce", "cut a divergent trace down to the smallest standalone trace that diverges the same way (ddmin)");
  auto f = std::make_shared<ReduceFlags>();
  cmd->add_option("trace", f->trace, "the divergent trace (or an unfinished capture TRACE.partial/)")->required();
  cmd->add_option("-o,--output", f->output, "the reduced trace (HDF5)")->required();
  cmd->add_option("--backend", f->backend, "the backend it diverges on: " + backend_choices())->capture_default_str();
  cmd->add_option("--json", f->json, "write the reduction as JSON (schema ssmcheck-reduce)");
  cmd->add_option("--max-replays", f->max_replays, "bound on the candidate traces replayed")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_flag("--bitwise", f->bitwise, "judge every tensor bit for bit");
  cmd->add_flag("--classes", f->classes, "judge under the tolerance classes even a trace this backend recorded")
      ->excludes("--bitwise");
  f->tol.add_to(cmd);
  cmd->callback([=] { *rc = run_reduce(*f); });
}

}  // namespace ssm::cli
