// What a file's @version promises (see file_version.h).
#include "formats/file_version.h"

#include <fmt/core.h>

namespace ssm::formats {

std::string FileVersions::cannot_read(int64_t v) const {
  if (v > newest)
    return fmt::format(
        "version {} was written by a newer ssmcheck: this one reads versions {}..{} (upgrade ssmcheck "
        "to read it)",
        v, oldest, newest);
  if (v < oldest)
    return fmt::format("version {} was never written by ssmcheck (versions {}..{} exist): not a file of this format", v,
                       oldest, newest);
  return "";
}

}  // namespace ssm::formats
