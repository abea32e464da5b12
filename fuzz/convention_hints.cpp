// Conventions an implementation does not declare, confirmed by a rerun (see convention_hints.h).
#include "fuzz/convention_hints.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/numerics_alternatives.h"
#include "core/op.h"
#include "reference/reference_backend.h"

namespace ssm::fuzz {

namespace {

// How a plug-in and a Python class declare the convention that `flag` ("--gates torch") names.
std::string declaration(const std::string& flag) {
  if (flag == "--gates torch") return "SSMP_GATES_TORCH; a Python class: gates = \"torch\"";
  if (flag == "--f16-store inf") return "SSMP_F16_STORE_INF; a Python class: f16_store = \"inf\"";
  if (flag == "--f16-rows carried") return "SSMP_F16_ROWS_CARRIED; a Python class: f16_rows = \"carried\"";
  return "its declaration says otherwise: remove it";  // the contract's value: a declaration too many
}

// The reference with its heads mapped tiled (LayerSpec::tiled_heads): the model of the rerun that
// confirms an implementation mapping heads so.
class TiledReference : public ref::ReferenceBackend {
 public:
  void create_pool(const Model& model, const PoolConfig& pool) override {
    Model tiled = model;
    for (LayerSpec& l : tiled.spec.layers) l.tiled_heads = true;
    ReferenceBackend::create_pool(tiled, pool);
  }
};

// Where a slip writes a padding row of a batch: pool slot 0 (a padding id clamped to 0), or the slot
// of the live row before it (a batch padded by repeating its last slot id).
enum class PadTarget { slot0, previous_row };

// The reference writing each padding row of a decode or verify into a live slot: after the batch's
// rows, the padding row's inputs run on that slot as one more row of the op (one decode, or a verify
// of the same k and arm). A slot the op cannot run on there (free, awaiting a commit) is left as it is.
class PaddingIntoLive : public ref::ReferenceBackend {
 public:
  explicit PaddingIntoLive(PadTarget target) : target_(target) {}
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override {
    std::vector<StepOutputs> out = ReferenceBackend::decode(slots, in);
    for (size_t i = 0; i < slots.size(); ++i)
      if (const int t = target(slots, i); t >= 0) try {
          ReferenceBackend::decode({t}, {in[i]});
        } catch (const std::exception&) {
        }
    return out;
  }
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override {
    std::vector<StepOutputs> out = ReferenceBackend::verify(slots, k, arm, in);
    for (size_t i = 0; i < slots.size(); ++i)
      if (const int t = target(slots, i); t >= 0) try {
          ReferenceBackend::verify({t}, k, arm, {in[i]});
        } catch (const std::exception&) {
        }
    return out;
  }

 private:
  PadTarget target_;
  // the live slot padding row i is written into; -1 when row i is live or has no such slot
  int target(const std::vector<int>& slots, size_t i) const {
    if (slots[i] != kPadRow) return -1;
    if (target_ == PadTarget::slot0) return 0;
    for (size_t j = i; j-- > 0;)
      if (slots[j] != kPadRow) return slots[j];
    return -1;
  }
};

// Whether the case passes with `reference` as its model.
bool passes_with(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& reference,
                 const BackendFactory& sut, const cmp::Tolerances& tol, cmp::Strictness strictness,
                 const Invariant& invariant, bool pause_async) {
  try {
    return check_script(config, script, reference, sut, tol, strictness, "", invariant, pause_async).pass;
  } catch (const std::exception&) {
    return false;  // the case cannot be set up that way: nothing confirmed
  }
}

bool has_padding_row(const std::vector<Op>& script) {
  for (const Op& op : script)
    if ((op.kind == OpKind::decode || op.kind == OpKind::verify) &&
        std::find(op.seqs.begin(), op.seqs.end(), kPadRow) != op.seqs.end())
      return true;
  return false;
}

}  // namespace

std::vector<SlipRerun> slip_reruns(const std::vector<LayerSpec>& layers, const std::vector<Op>& ops) {
  std::vector<SlipRerun> reruns;
  bool gdn = false, mamba2 = false;
  for (const LayerSpec& l : layers)
    if (l.tiling_differs()) (l.kind == LayerKind::gdn ? gdn : mamba2) = true;
  if (gdn || mamba2) {
    std::string how;
    if (gdn) how = "GDN value head v reads key head v % nk instead of v / (nv/nk)";
    if (mamba2) how += std::string(gdn ? "; " : "") + "Mamba-2 head h reads group h % ng instead of h / (nh/ng)";
    reruns.push_back({fmt::format("maps heads tiled ({})", how),
                      "maps its heads tiled instead of grouped (the contract's mapping is grouped: "
                      "docs/state-model.md, \"Shapes\")",
                      [] { return std::unique_ptr<Backend>(new TiledReference()); }});
  }
  if (has_padding_row(ops))
    for (const PadTarget t : {PadTarget::slot0, PadTarget::previous_row})
      reruns.push_back(
          {fmt::format("writes each padding row's update into {} (its inputs run on that slot after the batch's rows)",
                       t == PadTarget::slot0 ? "pool slot 0" : "the slot of the live row before it"),
           fmt::format("writes padding rows into a claimed slot instead of the dummy slot ({})",
                       t == PadTarget::slot0 ? "a padding slot id clamped to 0?"
                                             : "a batch padded by repeating its last slot id?"),
           [t] { return std::unique_ptr<Backend>(new PaddingIntoLive(t)); }});
  return reruns;
}

std::vector<std::string> slip_hints(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& sut,
                                    const cmp::Tolerances& tol, cmp::Strictness strictness, const Invariant& invariant,
                                    bool pause_async, const std::string& sut_name) {
  std::vector<std::string> hints;
  for (const SlipRerun& r : slip_reruns(config.spec().layers, script))
    if (passes_with(config, script, r.reference, sut, tol, strictness, invariant, pause_async))
      hints.push_back(
          fmt::format("the case passes when the reference {}: {} {}?", r.reference_does, sut_name, r.cause));
  return hints;
}

std::vector<std::string> convention_hints(const CaseConfig& config, const std::vector<Op>& script,
                                          const BackendFactory& model, const BackendFactory& sut,
                                          const cmp::Tolerances& tol, cmp::Strictness strictness,
                                          const Invariant& invariant, bool pause_async, const std::string& sut_name) {
  std::vector<std::string> hints;
  for (const NumericsAlternative& alt : numerics_alternatives(config.numerics, config.h_mode)) {
    CaseConfig c = config;
    c.numerics = alt.numerics;
    bool passes = false;
    try {
      passes = check_script(c, script, model, sut, tol, strictness, "", invariant, pause_async).pass;
    } catch (const std::exception&) {
      passes = false;  // the case cannot be set up that way: nothing confirmed
    }
    if (passes)
      hints.push_back(
          fmt::format("the case passes when the reference computes {}: {} computes it without declaring it "
                      "({}; {})?",
                      alt.what, sut_name, declaration(alt.flag), alt.flag));
  }
  for (std::string& h : slip_hints(config, script, sut, tol, strictness, invariant, pause_async, sut_name))
    hints.push_back(std::move(h));
  return hints;
}

}  // namespace ssm::fuzz
