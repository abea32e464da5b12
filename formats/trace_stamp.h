// Re-stamping a finished trace with the numerics that reproduce it: `ssmcheck approve`
// (cli/cmd_approve.cpp) after a bit-for-bit replay. Schema: docs/trace-format.md ("Bits across
// rebuilds").
#pragma once
#include <string>

namespace ssm::formats {

// Sets the root attribute `build` of the finished trace at `path` to `build` and changes nothing
// else: a copy with the new attribute replaces the file by the outputs rule (formats/output_file.h:
// created exclusively beside it, fsync'ed, renamed), so a failure leaves the trace as it was.
// Throws FormatError naming the file.
void stamp_trace_build(const std::string& path, const std::string& build);

}  // namespace ssm::formats
