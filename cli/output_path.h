// Output paths named on the command line (-o, --out, --junit, --json, --logs, --dump): checked
// before any work starts, one behaviour everywhere: a missing parent directory is created (and
// said so on stderr); a path that cannot be written is bad input (exit 2) naming the flag.
#pragma once
#include <string>

namespace ssm::cli {

void prepare_output_file(const std::string& path, const std::string& flag);  // "" and "-" (stdout): nothing
void prepare_output_dir(const std::string& dir, const std::string& flag);    // creates it
// A directory written only on failure (fuzz --out): not created now, but it must be creatable
// (or exist as a writable directory).
void check_output_dir(const std::string& dir, const std::string& flag);

}  // namespace ssm::cli
