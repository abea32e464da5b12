// `ssmcheck dump`: runs an op script (inputs derived from the seed) on one backend and writes
// the final state of every live sequence to an HDF5 dump (schema: docs/dump-format.md).
#include <fmt/core.h>

#include <stdexcept>

#include "cli/backend_registry.h"
#include "cli/case_options.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/errors.h"
#include "core/runner.h"
#include "formats/dump.h"

namespace ssm::cli {

namespace {

int dump_script(const CaseOptions& opt, const std::string& ops, const std::string& out) {
  prepare_output_file(out, "-o");
  const ModelSpec spec = opt.spec();
  const PoolConfig pool = opt.pool();
  const GenConfig gen = opt.gen();
  const std::vector<Op> script = parse_script(resolve_ops(ops));
  auto backend = make_backend(opt.backend);
  backend->create_pool(make_model(spec, gen), pool);
  Runner runner(*backend, input_source(spec, gen));
  for (size_t i = 0; i < script.size(); ++i) {
    try {
      runner.run(script[i], int(i));
    } catch (const StateError& e) {
      // The script cannot produce the state it asks for: bad input, nothing is written.
      fmt::print(stderr, "ssmcheck dump: op {} '{}' refused: {}\n", i, to_string(script[i]), e.what());
      return kExitBadInput;
    }
  }
  formats::Dump d;
  d.spec = spec;
  d.pool = pool;
  d.provenance.backend = backend->name();
  d.provenance.seed = opt.config.gen.seed;
  d.provenance.op_index = int(script.size()) - 1;
  d.provenance.ops = to_string(script);
  d.provenance.case_name = opt.name() + " --backend " + opt.backend;
  for (int seq : runner.live_seqs()) d.sequences.push_back({seq, backend->export_state(runner.slot_of(seq))});
  try {
    formats::write_dump(out, d);
  } catch (const formats::FormatError& e) {
    throw std::invalid_argument(std::string("-o ") + e.what());  // "-o PATH: /: cannot write: ..."
  }
  fmt::print("ssmcheck dump: wrote {} ({} sequence{}, {} layers of {}, h mode {}, backend {}, after op {})\n", out,
             d.sequences.size(), d.sequences.size() == 1 ? "" : "s", spec.layers.size(), spec.name,
             to_string(pool.h_mode), d.provenance.backend, d.provenance.op_index);
  return kExitOk;
}

}  // namespace

void add_dump_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("dump", "run an op script and write the final state of every live sequence (HDF5)");
  auto opt = std::make_shared<CaseOptions>();
  auto ops = std::make_shared<std::string>("alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
  auto out = std::make_shared<std::string>();
  opt->add_to(cmd);
  cmd->add_option("--ops", *ops, "op script (or @FILE), e.g. 'alloc; prefill 17; verify 4; commit 2 4'")->capture_default_str();
  cmd->add_option("-o,--output", *out, "HDF5 file to write (a file is replaced through a temporary name, a device written through)")
      ->required();
  cmd->callback([=] { *rc = dump_script(*opt, *ops, *out); });
}

}  // namespace ssm::cli
