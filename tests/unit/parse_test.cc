// The bounded parsers (parse.h): a table of hostile texts, none of which may
// throw, and the edges of every bound.
#include "vramd/parse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace vramd {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

struct IntCase {
  const char* name;
  std::string text;
  std::optional<int64_t> want;
};

class ParseInt64Table : public ::testing::TestWithParam<IntCase> {};

TEST_P(ParseInt64Table, ReadsTheWholeTextOrNothing) {
  std::optional<int64_t> got;
  ASSERT_NO_THROW(got = ParseInt64(GetParam().text));
  EXPECT_EQ(got, GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Parse, ParseInt64Table,
    ::testing::Values(IntCase{"Zero", "0", 0}, IntCase{"Plain", "1073741824", int64_t{1} << 30},
                      IntCase{"Negative", "-12", -12}, IntCase{"LeadingZeros", "007", 7},
                      IntCase{"Int64Max", "9223372036854775807", kMax},
                      IntCase{"Int64Min", "-9223372036854775808", kMin},
                      IntCase{"OnePastInt64Max", "9223372036854775808", std::nullopt},
                      IntCase{"NineteenNines", "9999999999999999999", std::nullopt},
                      IntCase{"FourHundredDigits", std::string(400, '9'), std::nullopt},
                      IntCase{"PastInt64Min", "-9223372036854775809", std::nullopt},
                      IntCase{"Empty", "", std::nullopt}, IntCase{"Minus", "-", std::nullopt},
                      IntCase{"Plus", "+1", std::nullopt}, IntCase{"LeadingSpace", " 1", std::nullopt},
                      IntCase{"TrailingSpace", "1 ", std::nullopt}, IntCase{"TrailingNewline", "1\n", std::nullopt},
                      IntCase{"Text", "lots", std::nullopt}, IntCase{"TrailingText", "12ab", std::nullopt},
                      IntCase{"Quantity", "1Gi", std::nullopt}, IntCase{"Fraction", "1.5", std::nullopt},
                      IntCase{"Exponent", "1e9", std::nullopt}, IntCase{"Hex", "0x10", std::nullopt},
                      IntCase{"EmbeddedNul", std::string("1\0" "2", 3), std::nullopt}),
    [](const auto& info) { return info.param.name; });

TEST(Parse, Int64BoundsAreInclusive) {
  EXPECT_EQ(ParseInt64("10", 0, 10), 10);
  EXPECT_EQ(ParseInt64("0", 0, 10), 0);
  EXPECT_EQ(ParseInt64("11", 0, 10), std::nullopt);
  EXPECT_EQ(ParseInt64("-1", 0, 10), std::nullopt);
}

TEST(Parse, DigitsTakeNoSignAtAll) {
  EXPECT_EQ(ParseDigits("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ParseDigits("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseDigits("-0"), std::nullopt);
  EXPECT_EQ(ParseDigits("+0"), std::nullopt);
  EXPECT_EQ(ParseDigits(""), std::nullopt);
  EXPECT_EQ(ParseDigits("1125899906842624", uint64_t{1} << 50), uint64_t{1} << 50);
  EXPECT_EQ(ParseDigits("1125899906842625", uint64_t{1} << 50), std::nullopt);
}

TEST(Parse, SmallIntIsBoundedAndNeverNegative) {
  EXPECT_EQ(ParseSmallInt("4096", 4096), 4096);
  EXPECT_EQ(ParseSmallInt("4097", 4096), std::nullopt);
  EXPECT_EQ(ParseSmallInt("99999999999999999999999", 4096), std::nullopt);
  EXPECT_EQ(ParseSmallInt("-1", 4096), std::nullopt);
  EXPECT_EQ(ParseSmallInt("65535", 65535), 65535);
  EXPECT_EQ(ParseSmallInt("1", -1), std::nullopt);
}

struct DoubleCase {
  const char* name;
  std::string text;
  std::optional<double> want;
};

class ParseDoubleTable : public ::testing::TestWithParam<DoubleCase> {};

TEST_P(ParseDoubleTable, FiniteNumbersOnly) {
  std::optional<double> got;
  ASSERT_NO_THROW(got = ParseDouble(GetParam().text));
  EXPECT_EQ(got, GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Parse, ParseDoubleTable,
    ::testing::Values(DoubleCase{"Integer", "2", 2.0}, DoubleCase{"Fraction", "2.5", 2.5},
                      DoubleCase{"Negative", "-0.25", -0.25}, DoubleCase{"Exponent", "1e9", 1e9},
                      DoubleCase{"LeadingDot", ".5", 0.5},
                      DoubleCase{"Max", "1.7976931348623157e308", 1.7976931348623157e308},
                      DoubleCase{"Overflow", "1e400", std::nullopt}, DoubleCase{"Huge", "1e30", 1e30},
                      DoubleCase{"Inf", "inf", std::nullopt}, DoubleCase{"Infinity", "Infinity", std::nullopt},
                      DoubleCase{"NaN", "nan", std::nullopt}, DoubleCase{"Hex", "0x1p3", std::nullopt},
                      DoubleCase{"Empty", "", std::nullopt}, DoubleCase{"Plus", "+1", std::nullopt},
                      DoubleCase{"Space", " 1", std::nullopt}, DoubleCase{"TrailingText", "1.5s", std::nullopt},
                      DoubleCase{"Comma", "1,5", std::nullopt}, DoubleCase{"Text", "two", std::nullopt}),
    [](const auto& info) { return info.param.name; });

TEST(Parse, DoubleBoundsAreInclusive) {
  EXPECT_EQ(ParseDouble("100", 0, 100), 100.0);
  EXPECT_EQ(ParseDouble("100.5", 0, 100), std::nullopt);
  EXPECT_EQ(ParseDouble("-1", 0, 100), std::nullopt);
}

}  // namespace
}  // namespace vramd
