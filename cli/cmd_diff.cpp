// `ssmcheck diff A.h5 B.h5`: compares two dumps under the tolerance classes. A is the
// reference side (its values are `ref`; the all-zero and non-finite checks apply to it).
// Exit 0 equal within tolerance, 1 different, 2 bad input (unreadable, malformed or
// incomparable dumps, bad tolerance flags).
#include <fmt/core.h>

#include <fstream>
#include <map>

#include "cli/commands.h"
#include "cli/html_option.h"
#include "cli/output_path.h"
#include "cli/tolerance_options.h"
#include "formats/verdict_text.h"
#include "compare/compare.h"
#include "core/op.h"
#include "formats/dump.h"
#include "report/divergence_grid.h"
#include "report/sections.h"

namespace ssm::cli {

namespace {

struct DiffOptions {
  std::string a, b;
  ToleranceOptions tolerance;
  std::string json;
  bool bitwise = false, allow_non_finite = false;
  int max_reports = 20;
  HtmlOption html;
};

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  write_text_atomically(path, files::json_text(j) + "\n", "--json");
}

std::string layer_identity(const LayerSpec& s) { return s.name() + fmt::format(",eps={}", s.eps); }

// Printable op at the dump's op index, from its script (empty when unknown).
std::string op_at(const formats::Provenance& p) {
  if (p.op_index < 0 || p.ops.empty()) return "";
  try {
    const auto script = parse_script(p.ops);
    if (size_t(p.op_index) < script.size()) return to_string(script[size_t(p.op_index)]);
  } catch (const std::exception&) {
  }
  return "";
}

// --html: a column per sequence, the fields of every layer as rows.
report::Page html_report(const DiffOptions& o, const formats::Dump& a, const formats::Dump& b,
                         const cmp::StateReport& rep) {
  report::DivergenceGrid grid;
  grid.title = o.a + " (A) vs " + o.b + " (B)";
  grid.column_axis = "sequence";
  std::map<int, int> column;
  for (const formats::Dump* d : {&a, &b})
    for (const auto& s : d->sequences)
      if (column.emplace(s.seq, int(grid.columns.size())).second) grid.columns.push_back(fmt::format("seq {}", s.seq));
  for (const cmp::TensorMargin& m : rep.margins) grid.add(column.at(m.where.seq), m);
  if (!rep.pass()) {
    const cmp::Where& w = rep.failures.front().where;
    grid.mark_first(column.at(w.seq), w.layer, report::field_of(w.tensor), w.text());
  }
  report::Page page;
  page.title = "ssmcheck diff " + o.a + " " + o.b;
  page.subtitle = fmt::format("model {}, h mode {}, {}", a.spec.name, to_string(a.pool.h_mode),
                              o.bitwise ? "bitwise" : "tolerance classes");
  page.add(grid.divergence_map());
  std::string text;
  for (const cmp::TensorReport& f : rep.failures) text += f.text();
  page.add(report::text_section("Mismatch reports", text.empty() ? "every tensor within tolerance\n" : text));
  return page;
}

int run_diff(const DiffOptions& o) {
  prepare_output_file(o.json, "--json");
  o.html.prepare();
  reserve_stdout_for(o.json);
  reserve_stdout_for(o.html.path);
  nlohmann::json j;
  j["schema"] = "ssmcheck-diff";
  j["schema_version"] = 1;
  j["tool"] = "ssmcheck diff";
  j["a"] = o.a;
  j["b"] = o.b;
  auto bad = [&](const std::string& msg) {
    fmt::print(stderr, "ssmcheck diff: bad input: {}\n", msg);
    j["result"] = "bad-input";
    j["exit_code"] = kExitBadInput;
    j["error"] = msg;
    try {
      write_json(o.json, j);
    } catch (const std::exception& e) {
      fmt::print(stderr, "ssmcheck diff: {}\n", e.what());
    }
    return kExitBadInput;
  };

  cmp::Tolerances tol;
  try {
    tol = o.tolerance.resolve();  // defaults, then --tolerance-file, then --tolerance
  } catch (const std::invalid_argument& e) {
    return bad(e.what());
  }
  const cmp::Strictness strictness = o.bitwise ? cmp::Strictness::bitwise : cmp::Strictness::classes;
  j["tolerances"] = tol.json();
  j["strictness"] = o.bitwise ? "bitwise" : "classes";

  formats::Dump a, b;
  try {
    formats::ReadOptions ro;
    ro.allow_non_finite = o.allow_non_finite;
    a = formats::read_dump(o.a, ro);
    b = formats::read_dump(o.b, ro);
  } catch (const formats::FormatError& e) {
    return bad(e.what());
  }
  if (a.spec.layers.size() != b.spec.layers.size())
    return bad(fmt::format("not comparable: {} has {} layers, {} has {}", o.a, a.spec.layers.size(), o.b,
                           b.spec.layers.size()));
  for (size_t l = 0; l < a.spec.layers.size(); ++l)
    if (layer_identity(a.spec.layers[l]) != layer_identity(b.spec.layers[l]))
      return bad(fmt::format("not comparable: layer {} is {} in {} but {} in {}", l,
                             layer_identity(a.spec.layers[l]), o.a, layer_identity(b.spec.layers[l]), o.b));
  if (a.pool.h_mode != b.pool.h_mode)
    return bad(fmt::format("not comparable: h mode {} in {} but {} in {}", to_string(a.pool.h_mode), o.a,
                           to_string(b.pool.h_mode), o.b));

  fmt::print("ssmcheck diff: {} (ref: backend {}, op {}) vs {} (got: backend {}, op {})\n", o.a,
             a.provenance.backend, a.provenance.op_index, o.b, b.provenance.backend, b.provenance.op_index);
  fmt::print("  model {} ({} layers), h mode {}, strictness {}\n", a.spec.name, a.spec.layers.size(),
             to_string(a.pool.h_mode), o.bitwise ? "bitwise" : "classes");
  if (a.provenance.op_index != b.provenance.op_index || a.provenance.ops != b.provenance.ops)
    fmt::print("  note: the dumps were taken after different op scripts or op indexes\n");

  cmp::StateReport rep;
  std::map<int, const formats::DumpSequence*> in_b;
  for (const auto& s : b.sequences) in_b[s.seq] = &s;
  const std::string op = op_at(a.provenance);
  for (const auto& s : a.sequences) {
    cmp::Where w;
    w.ref_side = "A";  // the first file
    w.got_side = "B";
    w.op_index = a.provenance.op_index;
    w.op = op;
    w.seq = s.seq;
    w.slot = s.state.slot;
    auto it = in_b.find(s.seq);
    if (it == in_b.end()) {
      cmp::TensorReport r;
      r.where = w;
      r.where.tensor = "sequence";
      r.pass = false;
      r.failure = fmt::format("sequence {} is in {} but not in {}", s.seq, o.a, o.b);
      rep.add(r);
      continue;
    }
    rep.merge(cmp::compare_state(s.state, it->second->state, tol, w, strictness, cmp::assumed_lineage(a.pool.h_mode)));
    in_b.erase(it);
  }
  for (const auto& [seq, s] : in_b) {
    cmp::TensorReport r;
    r.where.seq = seq;
    r.where.slot = s->state.slot;
    r.where.tensor = "sequence";
    r.pass = false;
    r.failure = fmt::format("sequence {} is in {} but not in {}", seq, o.b, o.a);
    rep.add(r);
  }

  for (size_t i = 0; i < rep.failures.size(); ++i) {
    if (o.max_reports >= 0 && i >= size_t(o.max_reports)) {
      fmt::print("... {} more failures (see --json for all)\n", rep.failures.size() - i);
      break;
    }
    fmt::print("{}", rep.failures[i].text());
  }
  fmt::print("ssmcheck diff: {}: {} tensors compared, {} failure{}\n",
             rep.pass() ? "EQUAL within tolerance" : "DIFFERENT", rep.tensors, rep.failures.size(),
             rep.failures.size() == 1 ? "" : "s");
  const int rc = rep.pass() ? kExitOk : kExitDiffer;
  j["result"] = rep.pass() ? "equal" : "different";
  j["exit_code"] = rc;
  j["report"] = rep.json();
  j["provenance"] = {{"a", {{"backend", a.provenance.backend}, {"tool_version", a.provenance.tool_version},
                            {"seed", a.provenance.seed}, {"op_index", a.provenance.op_index},
                            {"ops", a.provenance.ops}, {"case", a.provenance.case_name}}},
                     {"b", {{"backend", b.provenance.backend}, {"tool_version", b.provenance.tool_version},
                            {"seed", b.provenance.seed}, {"op_index", b.provenance.op_index},
                            {"ops", b.provenance.ops}, {"case", b.provenance.case_name}}}};
  try {
    write_json(o.json, j);
    if (o.html.any()) o.html.write(html_report(o, a, b, rep));
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  return rc;
}

}  // namespace

void add_diff_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("diff", "compare two state dumps under the tolerance classes "
                                         "(exit 0 equal, 1 different, 2 bad input)");
  auto o = std::make_shared<DiffOptions>();
  cmd->add_option("a", o->a, "reference dump (HDF5)")->required();
  cmd->add_option("b", o->b, "dump to check (HDF5)")->required();
  o->tolerance.add_to(cmd);
  cmd->add_option("--json", o->json, "write the machine-readable report to FILE ('-': stdout)");
  cmd->add_flag("--bitwise", o->bitwise, "compare every tensor under class exact");
  cmd->add_flag("--allow-non-finite", o->allow_non_finite,
                "read dumps holding NaN/Inf where the contract has none (conv, PLE, f32-mode fields: then the "
                "comparison judges them) instead of rejecting them; FP16-mode h fields may hold them anyway "
                "(docs/dump-format.md)");
  o->html.add_to(cmd, "divergence map: sequences x layers and fields");
  cmd->add_option("--max-reports", o->max_reports, "failure reports printed (-1: all)")->capture_default_str();
  cmd->callback([=] { *rc = run_diff(*o); });
}

}  // namespace ssm::cli
