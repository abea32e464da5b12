// Text that stays valid whatever bytes it is given: every writer of a verdict (JSON, JUnit XML,
// the HTML report) passes what it did not write itself (a plug-in's message, a file name, a model
// name) through these, so invalid UTF-8, control characters or markup in them can neither lose the
// verdict (nlohmann's type_error.316 on invalid UTF-8) nor break the document.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ssm::files {

// `s` with every invalid UTF-8 sequence (a stray continuation byte, a truncated or overlong
// sequence, a surrogate, a code point past U+10FFFF) replaced by U+FFFD, one per maximal invalid
// subpart as Unicode recommends.
std::string valid_utf8(std::string_view s);

// XML 1.0 character data or attribute text: valid UTF-8, & < > " ' escaped, and the characters XML
// 1.0 forbids (controls other than tab, newline and carriage return; U+FFFE, U+FFFF) replaced by
// U+FFFD.
std::string xml_text(std::string_view s);

// JSON text of `j` (indent as nlohmann's dump; -1: one line) with invalid UTF-8 in its strings
// replaced by U+FFFD instead of thrown.
std::string json_text(const nlohmann::json& j, int indent = 2);

// JSON text that is safe inside an HTML <script> element: every '<', '>' and '&' written as a
// \u escape, so no "</script>", "<!--" or "<script" can appear in it (HTML's script-data states).
std::string script_json_text(const nlohmann::json& j);

}  // namespace ssm::files
