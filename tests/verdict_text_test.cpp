// Text that breaks no verdict (formats/verdict_text.h): invalid UTF-8, control characters and
// markup in what a verdict quotes (a file name here; a plug-in's message, a model name) leave the
// JSON parseable, the JUnit XML well-formed and the HTML report's data inside its script element.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "formats/verdict_text.h"
#include "tests/support/shell.h"
#include "tests/support/file_bytes.h"

namespace ssm {
namespace {

const std::string kBin = SSMCHECK_BIN;
const std::string kTrace = std::string(SSMCHECK_FIXTURES_DIR) + "/traces/tiny_f32_every_op.h5";
const std::string kFffd = "\xEF\xBF\xBD";

TEST(VerdictText, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(files::valid_utf8("plain ascii"), "plain ascii");
  EXPECT_EQ(files::valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(files::valid_utf8("a\xFFz"), "a" + kFffd + "z");                        // not a lead byte
  EXPECT_EQ(files::valid_utf8("a\x80z"), "a" + kFffd + "z");                        // stray continuation
  EXPECT_EQ(files::valid_utf8("a\xE2\x82z"), "a" + kFffd + "z");                    // truncated: one subpart
  EXPECT_EQ(files::valid_utf8("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(files::valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(files::valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // past U+10FFFF
  EXPECT_EQ(files::valid_utf8("end\xE2"), "end" + kFffd);
}

TEST(VerdictText, XmlTextEscapesMarkupAndDropsWhatXmlForbids) {
  EXPECT_EQ(files::xml_text("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;");
  EXPECT_EQ(files::xml_text("tab\tnl\ncr\r"), "tab\tnl\ncr\r");
  EXPECT_EQ(files::xml_text(std::string("nul\0bell\a", 9)), "nul" + kFffd + "bell" + kFffd);
  EXPECT_EQ(files::xml_text("\xEF\xBF\xBE"), kFffd);  // U+FFFE
  EXPECT_EQ(files::xml_text("\xFF"), kFffd);
}

TEST(VerdictText, JsonSurvivesInvalidUtf8AndScriptJsonHasNoMarkup) {
  const nlohmann::json j = {{"message", "bad \xFF byte"}, {"html", "</script><!--<script>&"}};
  std::string text;
  ASSERT_NO_THROW(text = files::json_text(j));
  EXPECT_EQ(nlohmann::json::parse(text)["message"], "bad " + kFffd + " byte");
  const std::string script = files::script_json_text(j);
  EXPECT_EQ(script.find('<'), std::string::npos) << script;
  EXPECT_EQ(script.find('>'), std::string::npos) << script;
  EXPECT_EQ(script.find('&'), std::string::npos) << script;
  EXPECT_EQ(nlohmann::json::parse(script)["html"], "</script><!--<script>&") << "the escapes mean the same string";
}

// End to end: a trace whose file name holds invalid UTF-8, a control character and markup.
TEST(VerdictText, AHostileFileNameKeepsEveryVerdictValid) {
  test::TempDir dir;
  const std::string name = dir.path() + "/bad\xFF\xFE name \x01 <!--<script>& ]]>.h5";
  std::filesystem::copy_file(kTrace, name);
  const std::string json = dir.path() + "/v.json", junit = dir.path() + "/v.xml", html = dir.path() + "/v.html";
  const auto s = test::sh(kBin + " replay " + test::q(name) + " --backend reference --json " + test::q(json) +
                          " --junit " + test::q(junit) + " --html " + test::q(html));
  EXPECT_EQ(s.code, 0) << s.out;
  nlohmann::json v;
  ASSERT_NO_THROW(v = nlohmann::json::parse(test::file_bytes(json))) << test::file_bytes(json).substr(0, 300);
  EXPECT_TRUE(v["pass"].get<bool>());
  EXPECT_NE(v["cases"][0]["name"].get<std::string>().find("bad" + kFffd + kFffd + " name"), std::string::npos);
  // well-formed XML, checked by an XML parser
  const auto x = test::sh(
      "/usr/bin/python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
      "print(d.getElementsByTagName(\"testcase\")[0].getAttribute(\"name\"))' " +
      test::q(junit));
  EXPECT_EQ(x.code, 0) << x.out << test::file_bytes(junit);
  EXPECT_NE(x.out.find("<!--<script>& ]]>"), std::string::npos) << x.out;
  // the report's data element holds no markup: the page's scripts see all of it
  const std::string page = test::file_bytes(html);
  const size_t open = page.find("<script type=\"application/json\" id=\"ssmcheck-data\">");
  ASSERT_NE(open, std::string::npos);
  const size_t body = page.find('>', open) + 1, close = page.find("</script>", body);
  ASSERT_NE(close, std::string::npos);
  const std::string data = page.substr(body, close - body);
  EXPECT_EQ(data.find('<'), std::string::npos) << data.substr(0, 300);
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(data));
  EXPECT_TRUE(parsed.contains("sections"));
}

}  // namespace
}  // namespace ssm
