// Output paths named on the command line (-o, --out, --junit, --json, --html, --logs, --dump):
// checked before any work starts, one behaviour everywhere: a missing parent directory is created
// (and said so on stderr); a path that cannot be written is bad input (exit 2) naming the flag.
// Files are written by formats/output_file.h's rule: a regular file is replaced atomically, a
// symlink kept (its target replaced), a device or FIFO written through, never replaced.
#pragma once
#include <string>

namespace ssm::cli {

void prepare_output_file(const std::string& path, const std::string& flag);  // "" and "-" (stdout): nothing
void prepare_output_dir(const std::string& dir, const std::string& flag);    // creates it
// A directory written only on failure (fuzz --out): not created now, but it must be creatable
// (or exist as a writable directory).
void check_output_dir(const std::string& dir, const std::string& flag);
// Writes a whole text file by formats/output_file.h's rule: a regular file through an exclusive
// temporary in the same directory, renamed into place once every byte is written, fsync'ed and
// the file closed without error (a full disk or a crash never leaves a truncated verdict); a
// device or FIFO written through. "-" writes to stdout. Throws std::invalid_argument naming the
// flag (ENOSPC on a device: "--json PATH: cannot write: No space left on device").
void write_text_atomically(const std::string& path, const std::string& text, const std::string& flag);
// `--json -` (or `--junit -`): the verdict is then the only thing on stdout. Call before printing
// anything else: from here on the command's own output goes to stderr, and "-" in
// write_text_atomically writes to the real stdout. Any other path: nothing.
void reserve_stdout_for(const std::string& path);
// `--ops @FILE`: the script read from FILE (newlines and # comments as in any script); else the
// text itself.
std::string resolve_ops(const std::string& ops);

}  // namespace ssm::cli
