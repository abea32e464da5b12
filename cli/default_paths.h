// Where the data ssmcheck ships with (golden and faulty traces, Hugging Face configs) is found at
// run time: the one place that knows. An installed ssmcheck (<prefix>/bin/ssmcheck) reads
// <prefix>/share/ssmcheck/{traces,configs}; the build tree's ssmcheck, which has no such
// directory beside it, reads the source tree's fixtures/ (SSMCHECK_FIXTURES_DIR, a compile-time
// path that is only right on the machine that built it).
#pragma once
#include <string>

namespace ssm::cli {

// <exe dir>/../share/ssmcheck when it holds traces/, else the build tree's fixtures directory.
std::string default_data_dir();
// default_data_dir() + "/traces": the default of every --traces flag (gate, mutants).
std::string default_traces_dir();

}  // namespace ssm::cli
