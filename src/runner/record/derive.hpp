#pragma once
// What the runner derives from a finished run, in the runner process, before the sinks record it.
#include <optional>

#include "runner/runner.hpp"

namespace kindex::runner {

// Floors, ratios, speedup and SOL score of a finished run of `item` (in the runner, from the run's environment).
// T_b of L2/003 comes from `baseline` when given (times measured on this GPU), else from the published table.
void derive(RunResult& r, const WorkItem& item, const Environment& env, const std::optional<MeasuredRates>& measured,
            const std::optional<BaselineTimes>& baseline = std::nullopt);

}  // namespace kindex::runner
