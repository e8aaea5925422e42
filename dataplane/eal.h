// EAL start-up and shutdown. Arguments before "--" go to DPDK; the rest are returned.
#pragma once

#include <string>
#include <vector>

namespace sg::dp {

// Initialises the EAL from argv. On failure prints one line naming the problem and returns false.
// `app_args` receives the arguments after the EAL's (argv[0] first).
bool eal_init(int argc, char** argv, std::vector<char*>& app_args);
void eal_cleanup();

}  // namespace sg::dp
