// `ssmcheck run`: runs an op script on one backend and prints what each op did to the state.
#include <cmath>
#include <fmt/core.h>
#include <map>

#include "cli/backend_registry.h"
#include "cli/case_options.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/errors.h"
#include "core/runner.h"

namespace ssm::cli {

namespace {

double rms(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.size(); ++i) s += double(t.get(i)) * t.get(i);
  return t.size() ? std::sqrt(s / double(t.size())) : 0.0;
}

// Summary line of one field over every layer: how many layers changed and the rms.
std::string field_change(const std::vector<const Tensor*>& before, const std::vector<const Tensor*>& after) {
  int changed = 0, present = 0;
  double r0 = 0, r1 = 0;
  for (size_t l = 0; l < after.size(); ++l) {
    if (!after[l]) continue;
    ++present;
    const Tensor* b = l < before.size() ? before[l] : nullptr;
    if (!b || !b->bit_equal(*after[l])) ++changed;
    r0 += b ? rms(*b) : 0.0;
    r1 += rms(*after[l]);
  }
  if (!present) return "absent";
  if (before.empty()) return fmt::format("claimed, {} layers zeroed", after.size());
  const double n = double(after.size());
  return fmt::format("{}/{} layers changed, mean rms {:.6g} -> {:.6g}", changed, after.size(), r0 / n, r1 / n);
}

template <class F>
std::vector<const Tensor*> pick(const SequenceState* s, F f) {
  std::vector<const Tensor*> v;
  if (s)
    for (const auto& l : s->layers) v.push_back(f(l));
  return v;
}

// The PLE carries of the hosting layers (a model hosting none prints nothing): presence, the
// history of each, how the conv states changed, the checkpoint's and the snapshots.
void print_ple(const SequenceState* before, const SequenceState& after, const ModelSpec& spec) {
  std::string hist;
  size_t hosting = 0, ckpt = 0, snaps = 0;
  std::vector<const Tensor*> b, a;
  for (size_t l = 0; l < after.layers.size() && l < spec.layers.size(); ++l) {
    if (!spec.layers[l].ple.hosted()) continue;
    ++hosting;
    const LayerState& L = after.layers[l];
    const LayerState* B = before && l < before->layers.size() ? &before->layers[l] : nullptr;
    b.push_back(B && B->ple ? &B->ple->conv : nullptr);
    a.push_back(L.ple ? &L.ple->conv : nullptr);
    ckpt += L.ple_checkpoint ? 1 : 0;
    snaps = std::max(snaps, L.ple_snapshots.size());
    std::string ids;
    if (L.ple)
      for (int64_t i = 0; i < L.ple->history.size(); ++i) ids += (i ? "," : "") + fmt::format("{:g}", L.ple->history.get(i));
    hist += fmt::format("{}layer {} [{}]", hist.empty() ? "" : ", ", l, L.ple ? ids : "absent");
  }
  if (!hosting) return;
  fmt::print("    ple          history {}; conv: {}; checkpoint: {} of {} layers; {} snapshots\n", hist,
             field_change(before ? b : std::vector<const Tensor*>{}, a), ckpt, hosting, snaps);
}

void print_state_change(const SequenceState* before, const SequenceState& after, const ModelSpec& spec) {
  const LayerState& l0 = after.layers.at(0);
  fmt::print("    h            {} ({})\n",
             field_change(pick(before, [](const LayerState& l) { return &l.h; }),
                          pick(&after, [](const LayerState& l) { return &l.h; })),
             l0.h.shape_string());
  fmt::print("    conv         {}\n", field_change(pick(before, [](const LayerState& l) { return &l.conv; }),
                                                   pick(&after, [](const LayerState& l) { return &l.conv; })));
  auto ck = [](const LayerState& l) { return l.h_checkpoint ? &*l.h_checkpoint : nullptr; };
  auto cck = [](const LayerState& l) { return l.conv_checkpoint ? &*l.conv_checkpoint : nullptr; };
  fmt::print("    checkpoint   h: {}; conv: {}\n", field_change(pick(before, ck), pick(&after, ck)),
             field_change(pick(before, cck), pick(&after, cck)));
  fmt::print("    intermediates {} valid (last verify K={})\n", l0.h_intermediates.size(), after.last_verify_k);
  fmt::print("    h_is_f16     {}{}\n", l0.h_is_f16 ? "true" : "false",
             after.h_prefill_stage ? fmt::format(", stage rms {:.6g}", rms(*after.h_prefill_stage)) : "");
  print_ple(before, after, spec);
}

int run_script(const CaseOptions& opt, const std::string& ops, bool keep_going) {
  const CaseConfig cfg = opt.resolve();
  const ModelSpec spec = cfg.spec();
  const PoolConfig pool = cfg.pool();
  const GenConfig gen = cfg.gen;
  const std::vector<Op> script = parse_script(resolve_ops(ops));
  if (script.empty()) {  // nothing ran is not a success
    fmt::print(stderr, "ssmcheck run: the op script is empty: nothing ran\n");
    return kExitNothingRan;
  }
  auto backend = make_backend(opt.backend);
  backend->create_pool(make_model(spec, gen), pool);
  Runner runner(*backend, input_source(spec, gen));
  fmt::print("ssmcheck run: {} ops on {} ({}) through the {}\n", script.size(), spec.name, spec.layers_text(),
             backend->name());
  fmt::print("  {}, inputs {}\n", pool.name(), gen.name());
  std::map<int, SequenceState> last;
  int failures = 0;
  for (size_t i = 0; i < script.size(); ++i) {
    const Op& op = script[i];
    fmt::print("[{}] {}: {}\n", i, to_string(op), effect(op));
    OpResult r;
    try {
      r = runner.run(op, int(i));
    } catch (const StateError& e) {
      fmt::print("    refused: {}\n", e.what());
      ++failures;
      if (!keep_going) return kExitDiffer;
      continue;
    }
    for (size_t j = 0; j < r.outputs.size(); ++j) {
      if (r.seqs[j] == kPadRow) {
        fmt::print("    outputs      @pad: undefined (padding rows are never compared)\n");
        continue;
      }
      double s = 0;
      size_t n = 0;
      bool finite = true;
      for (const auto& layer : r.outputs[j].layers)
        for (float v : layer) { s += double(v) * v; ++n; finite = finite && std::isfinite(v); }
      fmt::print("    outputs      @{}: {} rows x {} layers, rms {:.6g}{}\n",
                 r.seqs[j], r.outputs[j].rows,
                 r.outputs[j].layers.size(), n ? std::sqrt(s / double(n)) : 0.0, finite ? "" : ", NOT FINITE");
    }
    if (op.kind == OpKind::release) { last.erase(op.seqs[0]); continue; }
    for (int seq : op.seqs) {
      if (seq == kPadRow) continue;
      SequenceState st = backend->export_state(runner.slot_of(seq));
      fmt::print("  @{} (slot {}):\n", seq, st.slot);
      auto it = last.find(seq);
      print_state_change(it == last.end() ? nullptr : &it->second, st, spec);
      last[seq] = std::move(st);
    }
  }
  fmt::print("ssmcheck run: {} ops, {} refused\n", script.size(), failures);
  return failures ? kExitDiffer : kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("run", "run an op script on one backend and show what each op did");
  auto opt = std::make_shared<CaseOptions>();
  auto ops = std::make_shared<std::string>("alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
  auto keep_going = std::make_shared<bool>(false);
  opt->add_to(cmd);
  cmd->add_option("--ops", *ops, "op script (or @FILE), e.g. 'alloc; prefill 17; verify 4; commit 2 4'")->capture_default_str();
  cmd->add_flag("--keep-going", *keep_going, "continue after a refused op");
  cmd->callback([=] { *rc = run_script(*opt, *ops, *keep_going); });
}

}  // namespace ssm::cli
