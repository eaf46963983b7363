#pragma once
// The runner's names for the shared measurement layer (src/measure: the device layer, the timer, the statistics of
// samples and the failures a run ends with). That layer sits below both the runner and the GPU reference's library
// (which times the Python solution worker's calls with the same code), so it includes nothing of the runner; these
// aliases let the runner's code keep its spelling (device::, time_device, RunFailure, ...).
#include "measure/device.hpp"
#include "measure/run_failure.hpp"
#include "measure/statistics.hpp"
#include "measure/timer.hpp"

namespace kindex::runner {

namespace device = measure::device;
using measure::RunFailure;
using measure::RunStatus;

using measure::cupti_available;
using measure::cupti_version;
using measure::time_device;
using measure::time_host;
using measure::TimingProtocol;
using measure::TimingSamples;

using measure::median;
using measure::percentile;
using measure::summarize;
using measure::summarize_trials;
using measure::Summary;
using measure::TrialSummary;

}  // namespace kindex::runner
