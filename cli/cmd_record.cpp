// `ssmcheck record`: runs an op script on one backend with seeded inputs and writes a state trace
// (formats/trace.h): the model, every op with its inputs and refusals, the backend's states after
// the selected ops and, with --outputs, the outputs.
#include <fmt/core.h>

#include <filesystem>
#include <set>

#include "cli/backend_registry.h"
#include "cli/case_options.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/errors.h"
#include "core/runner.h"
#include "formats/dump.h"
#include "formats/trace.h"

namespace ssm::cli {

namespace {

struct RecordFlags {
  CaseOptions opt;
  std::string ops, out, states = "all", state_layers = "all", producer = "ssmcheck record", description;
  bool outputs = false;
};

// "all", "none", "last" or a comma list of op indexes.
std::function<bool(int, int)> op_selection(const std::string& s) {
  if (s == "all") return [](int, int) { return true; };
  if (s == "none") return [](int, int) { return false; };
  if (s == "last") return [](int i, int n) { return i == n - 1; };
  const std::vector<int> v = parse_int_list(s, "--states");
  const std::set<int> set(v.begin(), v.end());
  return [set](int i, int) { return set.count(i) > 0; };
}

int run_record(const RecordFlags& f) {
  prepare_output_file(f.out, "-o");
  const CaseConfig cfg = f.opt.resolve();
  const std::vector<Op> script = parse_script(resolve_ops(f.ops));
  if (script.empty()) throw std::invalid_argument("--ops: empty script");
  const auto selected = op_selection(f.states);
  formats::TraceHeader h;
  h.producer = f.producer;
  h.model = cfg.model();
  h.pool = cfg.pool();
  h.seed = cfg.gen.seed;
  // The script inline up to 512 KiB (about 40,000 ops). A longer one goes by the file it came
  // from, or by its length: 10^5 ops are 1.2 MB of text in this one attribute, beyond the 1 MiB the
  // reader accepts of a string (formats/hdf5_file.cpp), and the ops themselves are in the trace.
  const std::string text = to_string(script);
  h.case_name =
      cfg.flags() + (text.size() <= (1u << 19)  ? " --ops '" + text + "'"
                     : f.ops.rfind('@', 0) == 0 ? " --ops " + f.ops
                                                : fmt::format(" --ops '<{} ops, as in the trace>'", script.size()));
  h.description = f.description;
  const ModelSpec& spec = h.model.spec;
  std::vector<int> layers;
  if (f.state_layers == "all") {
    for (size_t l = 0; l < spec.layers.size(); ++l) layers.push_back(int(l));
  } else {
    for (int l : parse_int_list(f.state_layers, "--state-layers")) {
      if (l < 0 || size_t(l) >= spec.layers.size())
        throw std::invalid_argument(fmt::format("--state-layers: layer {} outside 0..{}", l, spec.layers.size() - 1));
      layers.push_back(l);
    }
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  }
  auto backend = make_backend(f.opt.backend);
  h.backend = backend->name();
  h.build = formats::build_id(*backend);  // replaying on the same backend and numerics is bitwise
  backend->create_pool(h.model, h.pool);
  // the same generated inputs as `run` and `check` on these flags (keyed like every Runner);
  // what the backend was given is what the trace records
  formats::TraceOp* current = nullptr;
  const InputSource generated = input_source(spec, cfg.gen);
  Runner runner(*backend, [&](const InputKey& key, int rows) {
    StepInputs in = generated(key, rows);
    current->inputs.at(size_t(key.batch_row)) = in;
    return in;
  });
  formats::TraceWriter w(f.out, h);
  if (!w.moved_aside().empty())
    fmt::print(stderr, "ssmcheck record: an unfinished capture of {} was moved aside to {} (replay reads it)\n", f.out,
               w.moved_aside());
  int refused = 0, states = 0, outputs = 0;
  size_t i = 0;
  try {
    for (; i < script.size(); ++i) {
      formats::TraceOp t;
      t.op = script[i];
      const int rows = t.op.rows();
      if (t.op.takes_inputs()) {
        // inputs of an op refused before the backend asked for them: any valid rows will do
        t.inputs.resize(t.op.seqs.size());
        if (rows > 0)
          for (size_t e = 0; e < t.op.seqs.size(); ++e)
            t.inputs[e] = make_inputs(spec, cfg.gen, int(i), t.op.seqs[e], int(e), rows);
      }
      current = &t;
      OpResult r;
      try {
        r = runner.run(t.op, int(i));
      } catch (const StateError& e) {
        t.refused = e.kind();
        ++refused;
        fmt::print("  op {} '{}': refused: {}\n", i, to_string(t.op), e.what());
      }
      if (f.outputs && !t.refused && !r.outputs.empty()) {
        for (size_t e = 0; e < r.outputs.size(); ++e) {
          if (t.op.seqs[e] == kPadRow) t.outputs.push_back(std::nullopt);
          else {
            t.outputs.push_back(r.outputs[e]);
            ++outputs;
          }
        }
      }
      if (selected(int(i), int(script.size()))) {
        for (int seq : runner.live_seqs()) {
          SequenceState full = backend->export_state(runner.slot_of(seq));
          formats::TraceState ts;
          ts.seq = seq;
          ts.layers = layers;
          ts.state.slot = full.slot;
          ts.state.last_verify_k = full.last_verify_k;
          ts.state.h_prefill_stage = std::move(full.h_prefill_stage);
          for (int l : layers) ts.state.layers.push_back(std::move(full.layers.at(size_t(l))));
          t.states.push_back(std::move(ts));
          ++states;
        }
      }
      w.append(t);
    }
    w.close();
  } catch (const std::exception& e) {
    // the ops appended so far stay in PATH.partial/ (crash safety); say so instead of leaving it
    // behind silently
    fmt::print(stderr, "ssmcheck record: stopped at op {}: the {} ops before it are kept in {} (replay reads it)\n", i,
               w.ops(), formats::trace_partial_dir(f.out));
    throw;
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(f.out, ec);
  fmt::print("ssmcheck record: wrote {} ({} ops, {} refused, {} states, {} outputs, {} bytes) from {} on {}\n", f.out,
             script.size(), refused, states, outputs, ec ? 0 : bytes, backend->name(), cfg.flags());
  return kExitOk;
}

}  // namespace

void add_record_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("record", "run an op script on a backend and write a state trace (HDF5)");
  auto f = std::make_shared<RecordFlags>();
  f->opt.add_to(cmd);
  cmd->add_option("--ops", f->ops, "op script (or @FILE), e.g. 'alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode'")
      ->required();
  cmd->add_option("-o,--output", f->out, "trace file to write")->required();
  cmd->add_option("--states", f->states, "after which ops to record states: all, none, last, or op indexes '3,5'")
      ->capture_default_str();
  cmd->add_option("--state-layers", f->state_layers, "which layers a recorded state holds: all or a list '0,2'")
      ->capture_default_str();
  cmd->add_flag("--outputs", f->outputs, "record the outputs of prefill/decode/verify");
  cmd->add_option("--producer", f->producer, "the producer attribute")->capture_default_str();
  cmd->add_option("--description", f->description, "free text stored in the trace");
  cmd->callback([=] { *rc = run_record(*f); });
}

}  // namespace ssm::cli
