// src/byte_size.h: the byte counts every tool and environment variable reads.
#include "src/byte_size.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace weft {
namespace {

TEST(ByteSizeTest, ReadsDigitsAndBinaryUnits) {
  EXPECT_EQ(parse_byte_size("0"), size_t{0});
  EXPECT_EQ(parse_byte_size("8"), size_t{8});
  EXPECT_EQ(parse_byte_size("8B"), size_t{8});
  EXPECT_EQ(parse_byte_size("64K"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("64k"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("64KB"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("64KiB"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("4m"), size_t{4} << 20);
  EXPECT_EQ(parse_byte_size("1G"), size_t{1} << 30);
  EXPECT_EQ(parse_byte_size("3GiB"), size_t{3} << 30);
  EXPECT_EQ(parse_byte_size("007"), size_t{7});
}

TEST(ByteSizeTest, RejectsAnythingElse) {
  for (const char* bad : {"", "K", "-1", "+1", "1.5M", " 8", "8 ", "8b", "8iB", "8BB", "8KiBs", "8T", "8Kb", "0x10", "1e3"})
    EXPECT_EQ(parse_byte_size(bad), std::nullopt) << "'" << bad << "'";
}

TEST(ByteSizeTest, RejectsWhatDoesNotFit) {
  const size_t max = std::numeric_limits<size_t>::max();
  EXPECT_EQ(parse_byte_size(std::to_string(max)), max);
  EXPECT_EQ(parse_byte_size(std::to_string(max) + "0"), std::nullopt);
  EXPECT_EQ(parse_byte_size("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_byte_size(std::to_string(max >> 10) + "K"), (max >> 10) << 10);
  EXPECT_EQ(parse_byte_size(std::to_string((max >> 10) + 1) + "K"), std::nullopt);
  EXPECT_EQ(parse_byte_size("17179869184G"), std::nullopt);  // 2^34 G = 2^64
}

TEST(ByteSizeTest, FormatsTheShortestExactFormAndReadsItBack) {
  EXPECT_EQ(format_byte_size(0), "0");
  EXPECT_EQ(format_byte_size(1000), "1000");
  EXPECT_EQ(format_byte_size(1024), "1K");
  EXPECT_EQ(format_byte_size(1536), "1536");
  EXPECT_EQ(format_byte_size(size_t{512} << 10), "512K");
  EXPECT_EQ(format_byte_size(size_t{3} << 20), "3M");
  EXPECT_EQ(format_byte_size(size_t{1} << 40), "1024G");
  for (size_t b : {size_t{0}, size_t{1}, size_t{1023}, size_t{1024}, size_t{1} << 20, (size_t{5} << 30) + 1024,
                   std::numeric_limits<size_t>::max()})
    EXPECT_EQ(parse_byte_size(format_byte_size(b)), b) << b;
}

}  // namespace
}  // namespace weft
