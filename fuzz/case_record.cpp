#include "fuzz/case_record.h"

#include <fmt/core.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "formats/verdict_text.h"

namespace ssm::fuzz {

namespace {

using json = nlohmann::json;

const char* status_name(CaseRecord::Status s) {
  switch (s) {
    case CaseRecord::Status::pass: return "pass";
    case CaseRecord::Status::fail: return "fail";
    case CaseRecord::Status::gave_up: return "gave_up";
  }
  return "?";
}

json coverage_json(const Coverage& c) {
  return json{{"ops", c.ops},   {"refusals", c.refusals}, {"accepts", c.accepts},
              {"axes", c.axes}, {"signs", c.signs},       {"total", c.total}};
}

Coverage coverage_of(const json& j) {
  Coverage c;
  c.ops = j.at("ops").get<std::map<std::string, int64_t>>();
  c.refusals = j.at("refusals").get<std::map<std::string, int64_t>>();
  c.accepts = j.at("accepts").get<std::map<std::string, int64_t>>();
  c.axes = j.at("axes").get<std::map<std::string, int64_t>>();
  c.signs = j.at("signs").get<std::map<std::string, std::array<int64_t, 2>>>();
  c.total = j.at("total").get<int64_t>();
  return c;
}

json times_json(const PhaseTimes& t) {
  return json{{"setup", t.setup},         {"model", t.model},         {"sut", t.sut},
              {"export", t.export_},      {"compare", t.compare},     {"checks", t.checks},
              {"unchanged", t.unchanged}, {"compared", t.compared}, {"fields_unchanged", t.fields_unchanged}};
}

PhaseTimes times_of(const json& j) {
  PhaseTimes t;
  t.setup = j.at("setup").get<double>();
  t.model = j.at("model").get<double>();
  t.sut = j.at("sut").get<double>();
  t.export_ = j.at("export").get<double>();
  t.compare = j.at("compare").get<double>();
  t.checks = j.at("checks").get<double>();
  t.unchanged = j.at("unchanged").get<int64_t>();
  t.compared = j.at("compared").get<int64_t>();
  t.fields_unchanged = j.at("fields_unchanged").get<int64_t>();
  return t;
}

}  // namespace

std::string to_json_line(const CaseRecord& r) {
  return files::json_text(json{{"case", r.index},
                               {"campaign", fmt::format("{:016x}", r.campaign)},
                               {"status", status_name(r.status)},
                               {"ops", r.ops},
                               {"coverage", coverage_json(r.coverage)},
                               {"times", times_json(r.times)},
                               {"model", r.model_name},
                               {"sut", r.sut_name}},
                          -1);  // a name of any bytes
}

CaseRecord case_record_from_json_line(const std::string& line, const std::string& where) {
  try {
    const json j = json::parse(line);
    CaseRecord r;
    r.index = j.at("case").get<int>();
    const std::string s = j.at("status").get<std::string>();
    if (s == "pass") r.status = CaseRecord::Status::pass;
    else if (s == "fail") r.status = CaseRecord::Status::fail;
    else if (s == "gave_up") r.status = CaseRecord::Status::gave_up;
    else throw std::invalid_argument("status '" + s + "' is not pass, fail or gave_up");
    if (r.index < 0) throw std::invalid_argument("case index " + std::to_string(r.index) + " < 0");
    const std::string campaign = j.at("campaign").get<std::string>();
    size_t used = 0;
    r.campaign = campaign.size() == 16 ? std::stoull(campaign, &used, 16) : 0;
    if (used != 16) throw std::invalid_argument("campaign '" + campaign + "' is not 16 hex digits");
    r.ops = j.at("ops").get<int64_t>();
    r.coverage = coverage_of(j.at("coverage"));
    r.times = times_of(j.at("times"));
    r.model_name = j.at("model").get<std::string>();
    r.sut_name = j.at("sut").get<std::string>();
    return r;
  } catch (const json::exception& e) {
    throw std::invalid_argument(where + ": not a case record: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": not a case record: " + e.what());
  }
}

std::vector<CaseRecord> read_case_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::vector<CaseRecord> v;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (!line.empty()) v.push_back(case_record_from_json_line(line, path + ":" + std::to_string(n)));
  return v;
}

}  // namespace ssm::fuzz
