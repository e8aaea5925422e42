#include "dataplane/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <cstdio>

namespace sg::dp {

bool eal_init(int argc, char** argv, std::vector<char*>& app_args) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0) {
    std::fprintf(stderr, "stormgate: DPDK EAL init failed: %s (check the EAL arguments before '--')\n",
                 rte_strerror(rte_errno));
    return false;
  }
  app_args.clear();
  app_args.push_back(argv[0]);
  for (int i = used + 1; i < argc; ++i) app_args.push_back(argv[i]);
  return true;
}

void eal_cleanup() { rte_eal_cleanup(); }

}  // namespace sg::dp
