// A plan's name read back into the plan: the inverse of Candidate::describe, so a person can
// write (or edit) a row of `slapo-lua plan`'s table and have the planner price that plan and
// write its script (`--pick`), whether or not the search considered it. No Lua.
#pragma once

#include <string>

#include "plan/cost_model.h"

namespace slapo::plan {

/// The three forms Candidate::describe writes:
///   "tp 2 x dp 4[, ep 2 | , cp 2[ all-to-all]][, 4 micro][, sequence][, checkpoint][, zero-1][, zero-2 | , fully sharded]"
///   "tp 2 x dp 1 x pp 2 (6+6c)[, ep 2], 4 micro[, sequence][, zero-1][, zero-2 | , fully sharded]"
///   "pp 2 on tp x dp 2x1s,1x2z (11c+1 layers), 6 micro"
/// (c: a checkpointed stage; on a mesh, s: sequence parallelism, z: ZeRO-1). The settings after the
/// first part may come in any order. Throws naming the part that does not read and the forms.
Candidate parse_plan_name(const std::string& name);

}  // namespace slapo::plan
