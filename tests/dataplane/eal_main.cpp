// The dataplane tests' main: GoogleTest with one EAL for the whole process (eal_env.h).
#include <gtest/gtest.h>

#include "eal_env.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new sg::test::EalEnvironment);
  return RUN_ALL_TESTS();
}
