// Small helpers shared by the unit tests: reading the known-answer hex frames.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace urnic::test {

inline std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : hex)
    if (std::isxdigit(static_cast<unsigned char>(c))) digits.push_back(c);
  for (size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

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
