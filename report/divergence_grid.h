// The divergence map and error-growth sections of the HTML report (docs/report.md): every
// compared tensor of a replay, a lockstep case or a diff as a cell (column: an op, or a sequence
// for a diff; row: a layer and a field), coloured by error over tolerance
// (cmp::TensorReport::error_ratio), with the first divergence marked where the text report
// puts it. Failures that are not a tensor's (a refusal that differs, a missing sequence) get a
// row of their own (layer -1).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "fuzz/campaign.h"
#include "replay/replay.h"

namespace ssm::report {

struct GridCell {
  int column = 0;
  int layer = -1;       // -1: not a layer's field (a refusal, a sequence, the prefill stage)
  std::string field;    // "h", "h_intermediate" (every [t] folded into one row), "output", "refusal"
  double error_ratio = 0;
  bool pass = true;
  std::string detail;   // the mismatch report (failures) or one line (passing)
};

struct DivergenceGrid {
  std::string title;
  std::string column_axis = "op";    // what a column is
  std::vector<std::string> columns;  // labels
  std::vector<GridCell> cells;
  // The first divergence as the text report names it; column -1 when everything agreed.
  int first_column = -1, first_layer = -1;
  std::string first_field, first_text;
  std::string note;  // one line under the map (e.g. where a replay stopped)

  void add(int column, const cmp::TensorMargin& m);
  // A failure that is not a tensor's, or the first divergence (mark_first also adds the cell
  // when no compared tensor landed there).
  void add_failure(int column, int layer, const std::string& field, const std::string& text);
  void mark_first(int column, int layer, const std::string& field, const std::string& text);

  nlohmann::json divergence_map() const;  // section "divergence-map"
  nlohmann::json error_growth() const;    // section "error-growth": per field, the worst over layers
};

// "h_intermediate[2]" -> "h_intermediate": the field a tensor belongs to.
std::string field_of(const std::string& tensor);

// A replay of a trace: a column per op of the trace; its refusals and the first divergence.
DivergenceGrid grid_of(const formats::TraceSource& trace, const replay::ReplayResult& r);
DivergenceGrid grid_of(const formats::Trace& trace, const replay::ReplayResult& r);
// A lockstep run of one op script (fuzz::check_script: the shrunk case of a campaign).
DivergenceGrid grid_of(const fuzz::ReplayResult& r, const std::string& title);

}  // namespace ssm::report
