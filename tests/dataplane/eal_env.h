// One EAL per test process: --no-huge --no-pci, two lcores, a file prefix of its own.
#pragma once

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace sg::test {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    prefix_ = "sg-dptest-" + std::to_string(getpid());
    std::vector<std::string> args = {"dp_test", "-l", "0-1", "--no-huge", "--no-pci", "-m", "256",
                                     "--file-prefix", prefix_, "--no-shconf", "--no-telemetry",
                                     "--log-level", "*:warning"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_GE(rte_eal_init(static_cast<int>(argv.size()), argv.data()), 0) << "EAL init failed";
  }
  void TearDown() override {
    rte_eal_cleanup();
    std::error_code ec;  // the EAL leaves its runtime folder behind
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
  }

 private:
  std::string prefix_;
};

}  // namespace sg::test
