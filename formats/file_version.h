// What a file's @version promises, for dumps and traces alike (docs/trace-format.md, "Versions";
// docs/dump-format.md): a change that only adds (a new optional attribute, group or dataset, a new
// value of a convention attribute) keeps the version, since an older reader refuses the new member
// by name and a newer reader reads the older file as it always did; a change of meaning, shape,
// dtype, layout or units of an existing member, or its removal, bumps it. A reader reads every
// version ever written: it dispatches on the file's version, which must lie in [oldest, newest].
#pragma once
#include <cstdint>
#include <string>

namespace ssm::formats {

struct FileVersions {
  int64_t oldest;  // the first version ever written
  int64_t newest;  // the one this build writes
  // "" when this build reads `v`; else why not ("version 2 was written by a newer ssmcheck: this
  // one reads versions 1..1 (upgrade ssmcheck to read it)").
  std::string cannot_read(int64_t v) const;
};

}  // namespace ssm::formats
