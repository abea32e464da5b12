// The page assembly of report/html_page.h; the drawing is report/page.js.
#include "report/html_page.h"

#include <cmath>

#include "formats/verdict_text.h"
#include "report/page_assets.h"

namespace ssm::report {

namespace {

// HTML text: valid UTF-8, markup escaped (files::xml_text, whose escapes HTML shares).
std::string escape_html(const std::string& s) { return files::xml_text(s); }

}  // namespace

nlohmann::json ratio_json(double r) {
  if (std::isinf(r) || std::isnan(r)) return "inf";
  return r;
}

std::string Page::html() const {
  const nlohmann::json data = {{"title", title}, {"subtitle", subtitle}, {"sections", sections}};
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  s += escape_html(title);
  s += "</title>\n<style>\n";
  s += assets::kPageCss;
  s += "</style>\n</head>\n<body>\n<header><h1>" + escape_html(title) + "</h1><p class=\"subtitle\">" +
       escape_html(subtitle) + "</p></header>\n<main id=\"sections\"></main>\n";
  s += "<script type=\"application/json\" id=\"ssmcheck-data\">";
  s += files::script_json_text(data);
  s += "</script>\n<script>\n";
  s += assets::kPageJs;
  s += "</script>\n</body>\n</html>\n";
  return s;
}

}  // namespace ssm::report
