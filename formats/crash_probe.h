// Containment of libhdf5 crashes on corrupted files. HDF5 1.10 can crash on a file whose
// structure is damaged (a flipped byte in an attribute heap segfaults its decoder; a corrupted
// layout message makes H5Dread read past a buffer). ssmcheck therefore reads an untrusted file
// first in a forked child: a child that dies on a signal becomes an error naming the file, so the
// user gets exit 2 and a message, never a crash. Users: read_trace, read_dump.
#pragma once
#include <functional>
#include <string>

namespace ssm::formats {

// Runs `read` in a child process (stdout and stderr discarded). Returns "" when the child
// finished, whether or not `read` threw (the caller then reads for real and gets the same error
// with its message), or what killed it ("reading it crashed libhdf5 (SIGSEGV)"). When no child
// can be made, returns "" without probing.
// `threw` (when given) says whether `read` threw in the child (false when no child could be made).
std::string crash_probe(const std::function<void()>& read, bool* threw = nullptr);

}  // namespace ssm::formats
