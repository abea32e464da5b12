// The one error class of every file format here (dumps: formats/dump.h, traces: formats/trace.h):
// any problem with a file, message "FILE: OBJECT: what". OBJECT is an HDF5 path: "/" for the file
// itself, "/seq0/layer1/h" or "/ops/000003/state/seq0/layer1/h" for a dataset, "/model/layer0"
// for a group, "/model/layer0@nk" for an attribute.
#pragma once
#include <stdexcept>
#include <string>

namespace ssm::formats {

class FormatError : public std::runtime_error {
 public:
  FormatError(const std::string& file, const std::string& object, const std::string& what)
      : std::runtime_error(file + ": " + object + ": " + what), file_(file), object_(object), detail_(what) {}
  const std::string& file() const { return file_; }
  const std::string& object() const { return object_; }
  const std::string& detail() const { return detail_; }  // the "what" part alone

 private:
  std::string file_, object_, detail_;
};

}  // namespace ssm::formats
