// report/divergence_grid.h: cells from compared tensors, aggregated per (column, layer, field)
// into the sections the page draws.
#include "report/divergence_grid.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "report/html_page.h"

namespace ssm::report {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kPassingLines = 12;  // passing tensors listed per cell

}  // namespace

std::string field_of(const std::string& tensor) {
  const size_t b = tensor.find('[');
  return b == std::string::npos ? tensor : tensor.substr(0, b);
}

void DivergenceGrid::add(int column, const cmp::TensorMargin& m) {
  GridCell c;
  c.column = column;
  c.layer = m.where.layer;
  c.field = field_of(m.where.tensor);
  c.error_ratio = m.error_ratio;
  c.pass = m.pass;
  c.detail = m.pass ? m.summary() : m.report;
  cells.push_back(std::move(c));
}

void DivergenceGrid::add_failure(int column, int layer, const std::string& field, const std::string& text) {
  cells.push_back(GridCell{column, layer, field, kInf, false, text});
}

void DivergenceGrid::mark_first(int column, int layer, const std::string& field, const std::string& text) {
  first_column = column;
  first_layer = layer;
  first_field = field;
  first_text = text;
  const bool there = std::any_of(cells.begin(), cells.end(), [&](const GridCell& c) {
    return c.column == column && c.layer == layer && c.field == field && !c.pass;
  });
  if (!there) add_failure(column, layer, field, text);
}

nlohmann::json DivergenceGrid::divergence_map() const {
  // rows: by layer (-1 last: not a layer's), then by first appearance
  std::map<std::pair<int, std::string>, size_t> first_seen;
  for (size_t i = 0; i < cells.size(); ++i) first_seen.emplace(std::make_pair(cells[i].layer, cells[i].field), i);
  std::vector<std::pair<int, std::string>> rows;
  for (const auto& kv : first_seen) rows.push_back(kv.first);
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    const int la = a.first < 0 ? std::numeric_limits<int>::max() : a.first;
    const int lb = b.first < 0 ? std::numeric_limits<int>::max() : b.first;
    return la != lb ? la < lb : first_seen.at(a) < first_seen.at(b);
  });
  std::map<std::pair<int, std::string>, int> row_of;
  nlohmann::json jrows = nlohmann::json::array();
  for (size_t r = 0; r < rows.size(); ++r) {
    row_of[rows[r]] = int(r);
    jrows.push_back({{"layer", rows[r].first},
                     {"field", rows[r].second},
                     {"label", rows[r].first >= 0 ? fmt::format("layer {} {}", rows[r].first, rows[r].second)
                                                  : rows[r].second}});
  }
  // cells: the worst ratio of every tensor that landed there; the failures' reports first, then
  // a few passing lines
  struct Agg {
    double ratio = 0;
    bool pass = true;
    std::vector<std::string> failed, passed;
  };
  std::map<std::pair<int, int>, Agg> agg;
  for (const GridCell& c : cells) {
    Agg& a = agg[{c.column, row_of.at({c.layer, c.field})}];
    a.ratio = std::max(a.ratio, c.error_ratio);
    a.pass = a.pass && c.pass;
    (c.pass ? a.passed : a.failed).push_back(c.detail);
  }
  nlohmann::json jcells = nlohmann::json::array(), details = nlohmann::json::array();
  for (const auto& [key, a] : agg) {
    std::string text;
    for (const std::string& f : a.failed) text += f + (f.empty() || f.back() == '\n' ? "" : "\n");
    for (size_t i = 0; i < a.passed.size() && i < kPassingLines; ++i) text += a.passed[i] + "\n";
    if (a.passed.size() > kPassingLines) text += fmt::format("... and {} more passing\n", a.passed.size() - kPassingLines);
    jcells.push_back({key.first, key.second, ratio_json(a.ratio), a.pass, details.size()});
    details.push_back(text);
  }
  nlohmann::json first = nullptr;
  if (first_column >= 0)
    first = {{"column", first_column},
             {"row", row_of.at({first_layer, first_field})},
             {"layer", first_layer},
             {"field", first_field},
             {"text", first_text}};
  return {{"kind", "divergence-map"}, {"title", title}, {"column_axis", column_axis}, {"columns", columns},
          {"rows", jrows}, {"cells", jcells}, {"details", details}, {"first", first}, {"note", note}};
}

nlohmann::json DivergenceGrid::error_growth() const {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> worst;  // field -> per column (-1: not compared)
  for (const GridCell& c : cells) {
    if (c.column < 0 || size_t(c.column) >= columns.size()) continue;
    auto it = worst.find(c.field);
    if (it == worst.end()) {
      order.push_back(c.field);
      it = worst.emplace(c.field, std::vector<double>(columns.size(), -1.0)).first;
    }
    it->second[size_t(c.column)] = std::max(it->second[size_t(c.column)], c.error_ratio);
  }
  nlohmann::json series = nlohmann::json::array();
  for (const std::string& f : order) {
    nlohmann::json v = nlohmann::json::array();
    for (double r : worst.at(f)) v.push_back(r < 0 ? nlohmann::json(nullptr) : ratio_json(r));
    series.push_back({{"field", f}, {"ratios", v}});
  }
  return {{"kind", "error-growth"}, {"title", "Error over tolerance, " + title}, {"column_axis", column_axis},
          {"columns", columns}, {"series", series}};
}

DivergenceGrid grid_of(const formats::Trace& trace, const replay::ReplayResult& r) {
  return grid_of(formats::MemoryTrace(trace), r);
}

DivergenceGrid grid_of(const formats::TraceSource& trace, const replay::ReplayResult& r) {
  DivergenceGrid g;
  g.title = fmt::format("{} on {}", trace.source, r.backend);
  for (size_t i = 0; i < trace.size(); ++i) g.columns.push_back(fmt::format("{} {}", i, to_string(trace.heads[i].op)));
  for (const cmp::TensorMargin& m : r.margins) g.add(m.where.op_index, m);
  if (!r.pass() && r.ops_run < r.ops_total)
    g.note = fmt::format("The replay stopped at the first divergence: ops {} to {} were not replayed (--keep-going "
                         "goes on).", r.ops_run, r.ops_total - 1);
  // (refusals that differ, missing sequences and backend errors are divergences without a tensor)
  for (size_t i = 0; i < r.divergences.size(); ++i) {
    const replay::Divergence& d = r.divergences[i];
    const std::string field = d.tensor.empty() ? d.what : field_of(d.tensor);
    if (i == 0) g.mark_first(d.op_index, d.layer, field, d.headline());
    else if (d.tensor.empty()) g.add_failure(d.op_index, -1, field, d.text);
  }
  return g;
}

DivergenceGrid grid_of(const fuzz::ReplayResult& r, const std::string& title) {
  DivergenceGrid g;
  g.title = title;
  for (size_t i = 0; i < r.op_labels.size(); ++i) g.columns.push_back(fmt::format("{} {}", i, r.op_labels[i]));
  for (const cmp::TensorMargin& m : r.margins) g.add(m.where.op_index, m);
  if (r.failed_op >= 0) {
    // the first failing tensor of that op, as the lockstep's report lists it; else the op itself
    auto it = std::find_if(r.margins.begin(), r.margins.end(),
                           [&](const cmp::TensorMargin& m) { return m.where.op_index == r.failed_op && !m.pass; });
    if (it != r.margins.end())
      g.mark_first(r.failed_op, it->where.layer, field_of(it->where.tensor), it->where.text());
    else
      g.mark_first(r.failed_op, -1, "op", r.report);
  }
  return g;
}

}  // namespace ssm::report
