// The page assembly of report/html_page.h; the drawing is report/page.js.
#include "report/html_page.h"

#include <cmath>

#include "report/page_assets.h"

namespace ssm::report {

namespace {

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON that may sit inside <script>: "</" would end the element, so it is written "<\/" (the
// same string in JSON).
std::string script_safe(std::string json) {
  for (size_t p = json.find("</"); p != std::string::npos; p = json.find("</", p + 3)) json.insert(p + 1, "\\");
  return json;
}

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
  s += script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  s += "</script>\n<script>\n";
  s += assets::kPageJs;
  s += "</script>\n</body>\n</html>\n";
  return s;
}

}  // namespace ssm::report
