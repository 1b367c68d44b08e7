// Replays fuzz inputs through the fuzz harnesses (tests/fuzz/harness.h) in the normal build:
// every file in tests/fuzz/regressions/<target>/ (an input that once crashed or broke an
// invariant, fixed since) and the seed corpora in tests/fuzz/corpus/<target>/. Runs with gcc and
// without libFuzzer; scripts/fuzz.sh is what finds new inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/cm_harness.h"
#include "tests/fuzz/harness.h"

namespace urnic::test {
namespace {

namespace fs = std::filesystem;

fs::path fuzz_dir() { return fs::path(URNIC_TEST_DATA_DIR) / ".." / "fuzz"; }

// The regular files of <fuzz>/<kind>/<target>/, sorted; none if the folder does not exist.
std::vector<fs::path> inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> out;
  const fs::path dir = fuzz_dir() / kind / target;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename Harness>
void replay(const std::string& target, Harness harness) {
  const auto seeds = inputs("corpus", target);
  EXPECT_FALSE(seeds.empty()) << "no seed corpus for " << target;
  auto all = inputs("regressions", target);
  all.insert(all.end(), seeds.begin(), seeds.end());
  for (const fs::path& p : all) {
    SCOPED_TRACE(p.string());
    const std::vector<uint8_t> data = read_bytes(p);
    EXPECT_EQ(harness(data.data(), data.size()), "");
  }
}

TEST(FuzzRegressions, ParseInputs) { replay("fuzz_parse", fuzz::check_parse); }

TEST(FuzzRegressions, AdapterInputs) {
  ASSERT_NE(fuzz::adapter_pool(), nullptr);
  replay("fuzz_adapter", fuzz::check_adapter);
}

TEST(FuzzRegressions, CmInputs) {
  ASSERT_NE(fuzz::cmf::cm_static(), nullptr);
  replay("fuzz_cm", fuzz::check_cm);
}

}  // namespace
}  // namespace urnic::test
