// Text that stays valid whatever bytes it is given (see verdict_text.h).
#include "formats/verdict_text.h"

#include <cstdint>

namespace ssm::files {

namespace {
constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at s[i], with its code point in *cp; 0 when invalid.
size_t valid_at(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) n = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// The bytes one invalid sequence at s[i] spans: its lead byte and the bytes after it that still
// form a prefix of a well-formed sequence (Unicode's "maximal subpart"), at least one.
size_t invalid_span(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t want = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
  // the second byte's range rules out overlongs, surrogates and code points past U+10FFFF
  const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
  const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  size_t n = 1;
  while (n < want && i + n < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i + n]);
    if (n == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
    ++n;
  }
  return n;
}

template <class Emit>
void each_char(std::string_view s, Emit emit) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = valid_at(s, i, &cp);
    if (n) {
      emit(s.substr(i, n), cp);
      i += n;
    } else {
      emit(std::string_view(kReplacement), 0xFFFD);
      i += invalid_span(s, i);
    }
  }
}
}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  each_char(s, [&](std::string_view bytes, uint32_t) { out.append(bytes); });
  return out;
}

std::string xml_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  each_char(s, [&](std::string_view bytes, uint32_t cp) {
    switch (cp) {
      case '&': out += "&amp;"; return;
      case '<': out += "&lt;"; return;
      case '>': out += "&gt;"; return;
      case '"': out += "&quot;"; return;
      case '\'': out += "&apos;"; return;
      default: break;
    }
    const bool forbidden = (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF;
    out.append(forbidden ? std::string_view(kReplacement) : bytes);
  });
  return out;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string script_json_text(const nlohmann::json& j) {
  const std::string text = json_text(j, -1);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {  // outside strings JSON has none of these; inside, the escape means the same
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

}  // namespace ssm::files
