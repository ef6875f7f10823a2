#include "store/refusal_codec.h"

#include <gtest/gtest.h>

namespace vramd::store {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

Refusal Sample() {
  Refusal r;
  r.uid = "u1";
  r.ns = "ml";
  r.name = "llama \"big\"";
  r.per_gpu = 8 * kGi;
  r.peak_per_gpu = 12 * kGi;
  r.gpu_count = 2;
  r.victim = true;
  r.priority = -1000;
  r.idle_ttl_ms = 600'000;
  r.nodes = {"node-1", "node-2"};
  r.ts_ms = 1'700'000'000'123;
  return r;
}

// What record_refusals.lua stores: the server's time, then the body.
std::string Stored(const Refusal& r) { return "{\"ts_ms\":" + std::to_string(r.ts_ms) + "," + EncodeRefusalBody(r); }

TEST(RefusalCodec, RoundTripsEveryField) {
  simdjson::ondemand::parser parser;
  const Refusal in = Sample();
  Refusal out;
  out.uid = in.uid;  // the field name, not in the text
  std::string why;
  ASSERT_TRUE(DecodeRefusal(parser, Stored(in), &out, &why)) << why;
  EXPECT_EQ(out, in);
}

TEST(RefusalCodec, WritesAtMostTheMaximumOfNodes) {
  Refusal in = Sample();
  in.nodes.assign(kMaxRefusalNodes + 5, "n");
  simdjson::ondemand::parser parser;
  Refusal out;
  std::string why;
  ASSERT_TRUE(DecodeRefusal(parser, Stored(in), &out, &why)) << why;
  EXPECT_EQ(out.nodes.size(), kMaxRefusalNodes);
}

struct BadCase {
  const char* name;
  const char* text;
  const char* why;
};

class RefusalCodecRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(RefusalCodecRejects, Malformed) {
  simdjson::ondemand::parser parser;
  Refusal out;
  std::string why;
  EXPECT_FALSE(DecodeRefusal(parser, GetParam().text, &out, &why));
  EXPECT_NE(why.find(GetParam().why), std::string::npos) << why;
}

INSTANTIATE_TEST_SUITE_P(
    RefusalCodec, RefusalCodecRejects,
    ::testing::Values(BadCase{"NotJson", "soon", "not"}, BadCase{"Array", "[1]", "not a JSON object"},
                      BadCase{"NoTime", R"({"per_gpu":1})", "missing"},
                      BadCase{"NoDemand", R"({"ts_ms":1})", "missing"},
                      BadCase{"NegativeDemand", R"({"ts_ms":1,"per_gpu":-1})", "per_gpu"},
                      BadCase{"TimeIsAString", R"({"ts_ms":"1","per_gpu":1})", "ts_ms"},
                      BadCase{"ZeroGpus", R"({"ts_ms":1,"per_gpu":1,"gpu_count":0})", "gpu_count"},
                      BadCase{"PriorityPastInt32", R"({"ts_ms":1,"per_gpu":1,"priority":2147483648})", "priority"},
                      BadCase{"TtlPastThirtyDays", R"({"ts_ms":1,"per_gpu":1,"idle_ttl_ms":2592000001})",
                              "idle_ttl_ms"},
                      BadCase{"NodeNotAString", R"({"ts_ms":1,"per_gpu":1,"nodes":[1]})", "nodes"},
                      BadCase{"VictimNotABool", R"({"ts_ms":1,"per_gpu":1,"victim":"yes"})", "victim"},
                      BadCase{"TrailingGarbage", R"({"ts_ms":1,"per_gpu":1} x)", "not"}),
    [](const auto& info) { return info.param.name; });

TEST(RefusalCodec, SkipsUnknownKeys) {
  simdjson::ondemand::parser parser;
  Refusal out;
  std::string why;
  ASSERT_TRUE(DecodeRefusal(parser, R"({"future":{"a":[1]},"ts_ms":5,"per_gpu":7})", &out, &why)) << why;
  EXPECT_EQ(out.ts_ms, 5);
  EXPECT_EQ(out.per_gpu, 7);
}

}  // namespace
}  // namespace vramd::store
