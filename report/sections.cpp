// report/sections.h
#include "report/sections.h"

#include <fmt/core.h>

#include <map>
#include <stdexcept>

namespace ssm::report {

namespace {

const char* status_name(replay::GateCase::Status s) {
  switch (s) {
    case replay::GateCase::Status::pass: return "pass";
    case replay::GateCase::Status::fail: return "fail";
    case replay::GateCase::Status::skipped: return "skip";
  }
  return "?";
}

nlohmann::json bars(const std::string& title, const std::map<std::string, int64_t>& counts) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [name, n] : counts) items.push_back({name, n});
  return {{"title", title}, {"items", items}};
}

// The field `key` of `j` (an object), of the type `is` checks; what is wrong named with `where`.
template <class Check>
const nlohmann::json& field(const nlohmann::json& j, const std::string& key, Check is, const char* type,
                            const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw std::invalid_argument(fmt::format("{}: missing field '{}'", where, key));
  const nlohmann::json& v = j.at(key);
  if (!is(v)) throw std::invalid_argument(fmt::format("{}: field '{}' is not {}", where, key, type));
  return v;
}
bool is_number(const nlohmann::json& v) { return v.is_number(); }
bool is_string(const nlohmann::json& v) { return v.is_string(); }
bool is_array(const nlohmann::json& v) { return v.is_array(); }

}  // namespace

nlohmann::json checks_section(const replay::GateResult& verdict, const std::string& title) {
  nlohmann::json rows = nlohmann::json::array();
  for (const replay::GateCase& c : verdict.cases)
    rows.push_back({{"suite", c.suite}, {"name", c.name}, {"status", status_name(c.status)}, {"seconds", c.seconds},
                    {"message", c.message}, {"details", c.details}});
  return {{"kind", "checks"}, {"title", title}, {"pass", verdict.pass()}, {"seconds", verdict.seconds},
          {"rows", rows}};
}

nlohmann::json coverage_section(const fuzz::Coverage& coverage, const std::vector<std::string>& missing,
                                const std::string& title) {
  nlohmann::json groups = nlohmann::json::array();
  groups.push_back(bars("ops applied", coverage.ops));
  groups.push_back(bars("accept positions (commit n/k, rollback n)", coverage.accepts));
  groups.push_back(bars("refused by both sides", coverage.refusals));
  groups.push_back(bars("thresholds, clamps and configuration axes", coverage.axes));
  return {{"kind", "coverage"}, {"title", title}, {"total", coverage.total}, {"groups", groups}, {"missing", missing}};
}

nlohmann::json bandwidth_section(const nlohmann::json& bench, const std::string& source) {
  const double ceiling = field(bench, "copy_gbs", is_number, "a number", source).get<double>();
  const nlohmann::json& rows = field(bench, "rows", is_array, "an array", source);
  std::vector<std::string> order;
  std::map<std::string, nlohmann::json> points;  // "op (h)" -> [[batch, GB/s, us], ...]
  std::map<std::string, std::pair<std::string, std::string>> op_h;  // "op (h)" -> (op, h)
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = fmt::format("{}: rows[{}]", source, i);
    const nlohmann::json& r = rows[i];
    const std::string op = field(r, "op", is_string, "a string", where).get<std::string>();
    const std::string h = field(r, "h", is_string, "a string", where).get<std::string>();
    const std::string name = fmt::format("{} ({})", op, h);
    op_h[name] = {op, h};
    const double batch = field(r, "batch", is_number, "a number", where).get<double>();
    const double gbs = field(r, "gbs", is_number, "a number", where).get<double>();
    const double us = field(r, "time_us", is_number, "a number", where).get<double>();
    if (batch < 1 || !(gbs >= 0) || !(us > 0))
      throw std::invalid_argument(fmt::format("{}: batch {}, GB/s {}, time {} us: impossible values", where, batch,
                                              gbs, us));
    if (!points.count(name)) order.push_back(name);
    points[name].push_back({batch, gbs, us});
  }
  if (order.empty()) throw std::invalid_argument(source + ": no rows: nothing to draw");
  nlohmann::json series = nlohmann::json::array();
  for (const std::string& n : order)
    series.push_back({{"name", n}, {"op", op_h.at(n).first}, {"h", op_h.at(n).second}, {"points", points.at(n)}});
  const std::string device = field(bench, "device", is_string, "a string", source).get<std::string>();
  const std::string model = field(bench, "model", is_string, "a string", source).get<std::string>();
  return {{"kind", "bandwidth"},
          {"title", fmt::format("Effective bandwidth against batch: {}, {}", model, device)},
          {"ceiling_gbs", ceiling},
          {"series", series}};
}

nlohmann::json text_section(const std::string& title, const std::string& text) {
  return {{"kind", "text"}, {"title", title}, {"text", text}};
}

}  // namespace ssm::report
