// Small helpers shared by the unit tests: reading the known-answer hex frames.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/frames.h"

namespace urnic::test {

inline std::filesystem::path vectors_dir() {
  return std::filesystem::path(URNIC_TEST_DATA_DIR) / "vectors";
}

inline std::vector<uint8_t> read_vector(const std::string& name) {
  std::ifstream in(vectors_dir() / name);
  EXPECT_TRUE(in.good()) << "missing vector " << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return from_hex(ss.str());
}

}  // namespace urnic::test
