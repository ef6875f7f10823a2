#include "vramd/ledger/quantity.h"

#include <gtest/gtest.h>

#include <limits>

namespace vramd::ledger {
namespace {

struct ParseCase {
  const char* name;
  const char* text;
  int64_t bytes;
};

class ParseBytesOk : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseBytesOk, ParsesToExactBytes) {
  Result<int64_t> r = ParseBytes(GetParam().text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, GetParam().bytes);
}

constexpr int64_t kGi = int64_t{1} << 30;

INSTANTIATE_TEST_SUITE_P(
    Quantity, ParseBytesOk,
    ::testing::Values(
        ParseCase{"BinaryGi", "54Gi", 54 * kGi}, ParseCase{"BinaryKi", "16Ki", 16384},
        ParseCase{"BinaryMi", "512Mi", 512ll << 20}, ParseCase{"BinaryTi", "2Ti", 2ll << 40},
        ParseCase{"BinaryPi", "1Pi", 1ll << 50}, ParseCase{"BinaryEi", "7Ei", 7ll << 60},
        ParseCase{"DecimalM", "1500M", 1'500'000'000}, ParseCase{"DecimalLowerK", "16k", 16'000},
        ParseCase{"DecimalG", "8G", 8'000'000'000}, ParseCase{"DecimalT", "1T", 1'000'000'000'000},
        ParseCase{"DecimalP", "2P", 2'000'000'000'000'000}, ParseCase{"DecimalE", "9E", 9'000'000'000'000'000'000},
        ParseCase{"Exponent", "1e9", 1'000'000'000}, ParseCase{"ExponentUpper", "5E3", 5000},
        ParseCase{"ExponentPlus", "2e+2", 200}, ParseCase{"ExponentNegativeWhole", "1000e-3", 1},
        ParseCase{"PlainInteger", "137438953472", 137438953472}, ParseCase{"Zero", "0", 0},
        ParseCase{"NegativeZero", "-0", 0}, ParseCase{"PlusSign", "+5Ki", 5120},
        ParseCase{"FractionThatIsWhole", "1.5Gi", 3 * kGi / 2}, ParseCase{"FractionDecimal", "0.5k", 500},
        ParseCase{"MilliWhole", "1000m", 1}, ParseCase{"TrailingDot", "5.", 5},
        ParseCase{"LeadingDot", ".5k", 500},
        ParseCase{"MaxInt64", "9223372036854775807", 9223372036854775807},
        ParseCase{"LeadingZeros", "000042", 42}),
    [](const auto& info) { return info.param.name; });

struct BadCase {
  const char* name;
  const char* text;
  const char* message_part;
};

class ParseBytesError : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseBytesError, RejectsWithClearMessage) {
  Result<int64_t> r = ParseBytes(GetParam().text);
  ASSERT_FALSE(r.ok()) << "parsed to " << *r;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(GetParam().message_part), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Quantity, ParseBytesError,
    ::testing::Values(
        BadCase{"Empty", "", "empty"}, BadCase{"Negative", "-1Gi", "negative"},
        BadCase{"FractionOfByte", "0.5", "whole number of bytes"},
        BadCase{"MilliFraction", "1500m", "whole number of bytes"},
        BadCase{"Nano", "1n", "whole number of bytes"},
        BadCase{"Overflow", "9223372036854775808", "maximum"}, BadCase{"OverflowSuffix", "8Ei", "maximum"},
        BadCase{"OverflowHuge", "99999999999999999999999999999999999999999999", "maximum"},
        BadCase{"OverflowExponent", "1e19", "maximum"}, BadCase{"ExponentHuge", "1e99999", "exponent"},
        BadCase{"Garbage", "lots", "no digits"}, BadCase{"UnknownSuffix", "5GB", "unknown suffix"},
        BadCase{"LowercaseGi", "5gi", "unknown suffix"}, BadCase{"TwoDots", "1.2.3", "decimal point"},
        BadCase{"Space", "5 Gi", "unknown suffix"}, BadCase{"ExponentNoDigits", "5e+", "exponent"}, BadCase{"LowerE", "5e", "exponent"},
        BadCase{"OnlySign", "-", "no digits"}, BadCase{"Hex", "0x10", "unknown suffix"}),
    [](const auto& info) { return info.param.name; });

TEST(FormatBytes, UsesExactBinaryUnitsWhenWhole) {
  EXPECT_EQ(FormatBytes(38 * kGi), "38Gi");
  EXPECT_EQ(FormatBytes(512ll << 20), "512Mi");
  EXPECT_EQ(FormatBytes(900), "900");
  EXPECT_EQ(FormatBytes(0), "0");
  EXPECT_EQ(FormatBytes(3 * kGi / 2), "1.5Gi");
  EXPECT_EQ(FormatBytes(-2 * kGi), "-2Gi");
  EXPECT_EQ(FormatBytes(1024), "1Ki");
}

// Found by fuzz/quantity_fuzz.cc: 2000 bytes was rendered "2Ki", which reads
// (and parses) as exactly 2048.
TEST(FormatBytes, AnInexactAmountKeepsItsDecimal) {
  EXPECT_EQ(FormatBytes(2000), "2.0Ki");
  EXPECT_EQ(FormatBytes(2047), "2.0Ki");
  EXPECT_EQ(FormatBytes(kGi - 1), "1.0Gi");  // 1023.99...Mi rounds up a unit
  EXPECT_EQ(FormatBytes(-2000), "-2.0Ki");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "8.0Ei");
  for (int64_t x : {int64_t{2048}, 5 * kGi, 3 * kGi / 2}) EXPECT_EQ(*ParseBytes(FormatBytes(x)), x);
}

}  // namespace
}  // namespace vramd::ledger
