// The other sections of the HTML report (docs/report.md); the divergence map and error growth
// are report/divergence_grid.h.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/lockstep.h"
#include "replay/gate.h"

namespace ssm::report {

// "checks": one row per check of a verdict (gate, replay, fuzz, check): suite, name,
// pass/fail/skip, seconds, message; a row's details (the full report) shown on click.
nlohmann::json checks_section(const replay::GateResult& verdict, const std::string& title);

// "coverage": what a campaign reached, as bars: ops applied, accept positions, refusals, and the
// thresholds, clamps and configuration axes (fuzz::Coverage); `missing`: required and never reached.
nlohmann::json coverage_section(const fuzz::Coverage& coverage, const std::vector<std::string>& missing,
                                const std::string& title);

// "bandwidth": effective bandwidth against batch per op and h mode, with the device-to-device
// copy ceiling, from the JSON `ssmcheck_bench --json` writes (docs/report.md, "Benchmark JSON").
// Throws std::invalid_argument naming the first missing or ill-typed field.
nlohmann::json bandwidth_section(const nlohmann::json& bench, const std::string& source);

// "text": a report verbatim (monospace).
nlohmann::json text_section(const std::string& title, const std::string& text);

}  // namespace ssm::report
