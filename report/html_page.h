// One self-contained HTML page (docs/report.md): a title, a subtitle and a list of sections,
// each a JSON object with a "kind" that the page's own script (report/page.js, inlined) draws as
// inline SVG or HTML. No network, no external script or style: the file is the whole report.
// Section builders: report/divergence_grid.h (divergence map, error growth), report/sections.h
// (gate checks, campaign coverage, benchmark bandwidth, verbatim text).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace ssm::report {

struct Page {
  std::string title;     // <title> and the heading: what was checked
  std::string subtitle;  // one line under it: the command that wrote it
  nlohmann::json sections = nlohmann::json::array();
  void add(nlohmann::json section) { sections.push_back(std::move(section)); }
  // The page: the data as JSON in a <script type="application/json"> (every "</" written "<\/",
  // invalid UTF-8 replaced), then the drawing script and the style, inline.
  std::string html() const;
};

// A JSON value for a ratio that may be infinite: the number, or the string "inf" (JSON has no
// infinity); the page's script reads both.
nlohmann::json ratio_json(double r);

}  // namespace ssm::report
