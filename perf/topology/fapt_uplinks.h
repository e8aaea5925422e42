// bench_fapt's uplink-cap part: sites behind one shared uplink each, where the planner that
// sees the caps is compared with the same planner blind to them (the planner before caps
// existed), both scored by the capped round-time model, and with the baselines.
#pragma once

#include "bench_common.h"

namespace sg::topo {

// Prints its tables and adds its figures to `json`.
void uplinks_part(bool quick, bench::JsonLine& json);

}  // namespace sg::topo
