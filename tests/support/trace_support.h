// Support for the trace tests: the shell runner and temporary directory of tests/support/shell.h,
// and a recorder that runs an op script on the reference and returns it as a trace.
#pragma once
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/runner.h"
#include "fixtures/case_config.h"
#include "formats/trace.h"
#include "reference/reference_backend.h"
#include "tests/support/shell.h"

namespace ssm::test {

struct Recorded {
  formats::TraceHeader header;
  std::vector<formats::TraceOp> ops;
};

// Runs `script` on the reference with seeded inputs; records refusals, outputs and the state of
// every live sequence (layers `layers`, all when empty) after every op. `model`: cfg's model, or
// one built apart (record_model).
inline Recorded record_model(const CaseConfig& cfg, Model model, const std::string& script,
                             std::vector<int> layers = {}) {
  Recorded r;
  r.header.producer = "trace test";
  r.header.backend = "reference";
  r.header.model = std::move(model);
  r.header.pool = cfg.pool();
  r.header.seed = cfg.gen.seed;
  r.header.case_name = cfg.flags();
  const ModelSpec& spec = r.header.model.spec;
  if (layers.empty())
    for (size_t l = 0; l < spec.layers.size(); ++l) layers.push_back(int(l));
  ref::ReferenceBackend b;
  b.create_pool(r.header.model, r.header.pool);
  const formats::TraceOp* cur = nullptr;
  Runner run(b, [&](const InputKey& k, int) { return cur->inputs.at(size_t(k.batch_row)); });
  const std::vector<Op> ops = parse_script(script);
  for (size_t i = 0; i < ops.size(); ++i) {
    formats::TraceOp t;
    t.op = ops[i];
    if (t.op.takes_inputs()) {
      t.inputs.resize(t.op.seqs.size());
      for (size_t e = 0; e < t.op.seqs.size(); ++e)
        if (t.op.rows() > 0) t.inputs[e] = make_inputs(spec, cfg.gen, int(i), t.op.seqs[e], int(e), t.op.rows());
    }
    cur = &t;
    OpResult res;
    try {
      res = run.run(t.op, int(i));
    } catch (const StateError& e) {
      t.refused = e.kind();
    }
    for (size_t e = 0; e < res.outputs.size(); ++e)
      t.outputs.push_back(t.op.seqs[e] == kPadRow ? std::nullopt : std::optional<StepOutputs>(res.outputs[e]));
    for (int seq : run.live_seqs()) {
      SequenceState full = b.export_state(run.slot_of(seq));
      formats::TraceState ts;
      ts.seq = seq;
      ts.layers = layers;
      ts.state.slot = full.slot;
      ts.state.last_verify_k = full.last_verify_k;
      ts.state.h_prefill_stage = full.h_prefill_stage;
      for (int l : layers) ts.state.layers.push_back(full.layers[size_t(l)]);
      t.states.push_back(std::move(ts));
    }
    r.ops.push_back(std::move(t));
  }
  return r;
}
inline Recorded record(const CaseConfig& cfg, const std::string& script, std::vector<int> layers = {}) {
  return record_model(cfg, cfg.model(), script, std::move(layers));
}

inline CaseConfig case_of(const std::string& preset, HMode mode, uint64_t seed) {
  CaseConfig c;
  c.preset = preset;
  c.h_mode = mode;
  c.gen.seed = seed;
  return c;
}

}  // namespace ssm::test
