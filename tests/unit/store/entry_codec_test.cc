#include "store/entry_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "data/ledger/entries_v0_1.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::store {
namespace {

using ::testing::HasSubstr;
using ledger::Entry;
using ledger::EntryState;

constexpr int64_t kGi = int64_t{1} << 30;

// An entry with only the fields an old or minimal text has.
Entry Minimal(std::vector<int> gpus, int64_t per_gpu) {
  Entry e;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  return e;
}

Entry Everything() {
  Entry e;
  e.pod_uid = "uid-1";
  e.ns = "ml";
  e.name = "vllm-0";
  e.gpus = {1, 3};
  e.per_gpu = 20 * kGi;
  e.peak_per_gpu = 30 * kGi;
  e.model = "llama-3-70b";
  e.state = EntryState::kBound;
  e.created_ms = 1'795'000'000'000;
  e.priority = -1000;
  e.priority_class = "vramd-disposable";
  e.victim = true;
  e.used = 18 * kGi;
  e.used_ts_ms = 1'795'000'060'000;
  e.last_active_ms = 1'795'000'050'000;
  e.idle_ttl_ms = 600'000;
  e.owner_kind = "ReplicaSet";
  e.owner_uid = "rs-uid-1";
  e.evictable = true;
  e.gang = "job/train";
  return e;
}

// Decodes `text` into a fresh entry with `uid`; fails the test when it is rejected.
Entry MustDecode(std::string_view text, const std::string& uid = "uid-1") {
  EntryDecoder d;
  Entry e;
  std::string why;
  EXPECT_TRUE(d.Decode(text, &e, &why)) << text << ": " << why;
  e.pod_uid = uid;
  return e;
}

// Why `text` is rejected ("" when it is not).
std::string Rejection(std::string_view text) {
  EntryDecoder d;
  Entry e;
  std::string why;
  return d.Decode(text, &e, &why) ? "" : why;
}

TEST(EntryCodec, EveryFieldRoundTrips) {
  const Entry e = Everything();
  EXPECT_EQ(MustDecode(EncodeEntry(e, false)), e);
}

TEST(EntryCodec, EveryFieldRoundTripsAtItsBounds) {
  Entry e = Everything();
  e.priority = std::numeric_limits<int32_t>::min();
  e.priority_class = std::string(ledger::kMaxPriorityClassName, 'c');
  e.used = ledger::kMaxBytesPerGpu;
  e.used_ts_ms = kMaxEntryTimeMs;
  e.last_active_ms = kMaxEntryTimeMs;
  e.idle_ttl_ms = ledger::kMaxIdleTtlMs;
  e.owner_kind = std::string(ledger::kMaxOwnerField, 'k');
  e.owner_uid = std::string(ledger::kMaxOwnerField, 'u');
  e.gang = std::string(ledger::kMaxGangKey, 'g');
  EXPECT_EQ(MustDecode(EncodeEntry(e, false)), e);
  e.priority = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(MustDecode(EncodeEntry(e, false)), e);
}

TEST(EntryCodec, StringsWithQuotesAndUnicodeRoundTrip) {
  Entry e = Everything();
  e.priority_class = "class \"quoted\" \\ ünï 🚀";
  e.model = "m\n\t\x01";
  EXPECT_EQ(MustDecode(EncodeEntry(e, false)), e);
}

TEST(EntryCodec, AnEntryWithoutNewFactsIsWrittenAsVersion01WroteIt) {
  Entry e = Everything();
  e.priority = 0;
  e.priority_class.clear();
  e.victim = false;
  e.used = 0;
  e.used_ts_ms = 0;
  e.last_active_ms = 0;
  e.idle_ttl_ms = 0;
  e.owner_kind.clear();
  e.owner_uid.clear();
  e.evictable = false;
  e.gang.clear();
  EXPECT_EQ(EncodeEntry(e, false),
            R"({"ns":"ml","name":"vllm-0","gpus":[1,3],"per_gpu":21474836480,"peak_per_gpu":32212254720,)"
            R"("model":"llama-3-70b","state":"bound","created_ms":1795000000000})");
}

TEST(EntryCodec, NewFieldsGoBetweenStateAndCreatedOnlyWhereTheySaySomething) {
  EXPECT_EQ(EncodeEntry(Everything(), false),
            R"({"ns":"ml","name":"vllm-0","gpus":[1,3],"per_gpu":21474836480,"peak_per_gpu":32212254720,)"
            R"("model":"llama-3-70b","state":"bound","priority":-1000,"priority_class":"vramd-disposable",)"
            R"("victim":true,"used":19327352832,"used_ts_ms":1795000060000,"last_active_ms":1795000050000,)"
            R"("idle_ttl_ms":600000,"owner_kind":"ReplicaSet","owner_uid":"rs-uid-1","evictable":true,)"
            R"("gang":"job/train","created_ms":1795000000000})");
  Entry e = Everything();
  e.priority = 0;
  e.priority_class.clear();
  e.used = 0;
  EXPECT_THAT(EncodeEntry(e, false),
              HasSubstr(R"("state":"bound","victim":true,"used_ts_ms":1795000060000,"last_active_ms":)"));
}

TEST(EntryCodec, WithoutCreatedTheTextEndsWhereTheReserveScriptAppendsTheTime) {
  const std::string text = EncodeEntry(Everything(), true);
  ASSERT_TRUE(text.ends_with(R"(,"created_ms":)")) << text;
  Entry e = MustDecode(text + "1795000000009}");
  EXPECT_EQ(e.created_ms, 1'795'000'000'009);
  Entry want = Everything();
  want.created_ms = e.created_ms;
  EXPECT_EQ(e, want);
}

// set_state_fn.lua rewrites the first `"state":"..."` of the text in place:
// no string field may put one before the real one.
TEST(EntryCodec, TheFirstStateInTheTextIsTheEntrysState) {
  Entry e = Everything();
  e.state = EntryState::kReserved;
  e.ns = R"(x","state":"bound)";
  e.model = R"("state":"bound")";
  e.priority_class = R"("state":"terminating")";
  e.owner_kind = R"(","state":"bound)";
  e.gang = R"("state":"terminating")";
  const std::string text = EncodeEntry(e, false);
  const size_t at = text.find(R"("state":")");
  ASSERT_NE(at, std::string::npos);
  const std::string want = R"("state":"reserved")";
  EXPECT_EQ(text.substr(at, want.size()), want) << text;
  EXPECT_EQ(MustDecode(text), e);
}

TEST(EntryCodec, AbsentNewFieldsTakeTheirDefaults) {
  Entry e = MustDecode(R"({"gpus":[0],"per_gpu":5})", "");
  EXPECT_EQ(e, Minimal({0}, 5));
  EXPECT_EQ(e.priority, 0);
  EXPECT_EQ(e.priority_class, "");
  EXPECT_FALSE(e.victim);
  EXPECT_EQ(e.used, 0);
  EXPECT_EQ(e.used_ts_ms, 0);
  EXPECT_EQ(e.last_active_ms, 0);
}

TEST(EntryCodec, NullNewFieldsAreTheirDefaults) {
  Entry e = MustDecode(R"({"gpus":[0],"per_gpu":5,"priority_class":null,"victim":null})", "");
  EXPECT_EQ(e, Minimal({0}, 5));
}

TEST(EntryCodec, UnknownKeysAreSkippedWhateverTheirValue) {
  Entry e = MustDecode(
      R"({"future":{"a":[1,{"b":"c"}],"d":null},"gpus":[2],"list":[1,2,3],"per_gpu":7,"flag":false,)"
      R"("text":"state","n":1.5e300,"priority":3})",
      "");
  Entry want = Minimal({2}, 7);
  want.priority = 3;
  EXPECT_EQ(e, want);
}

// cjson (set_state_fn.lua's fallback re-encodes a whole entry) writes large
// numbers in exponent form.
TEST(EntryCodec, IntegralNumbersInExponentFormAreRead) {
  Entry e = MustDecode(
      R"({"gpus":[0],"per_gpu":1e+10,"priority":-1e+3,"used":1e+14,"used_ts_ms":1.795e+12,"last_active_ms":1.79e+12})",
      "");
  EXPECT_EQ(e.per_gpu, 10'000'000'000);
  EXPECT_EQ(e.priority, -1000);
  EXPECT_EQ(e.used, 100'000'000'000'000);
  EXPECT_EQ(e.used_ts_ms, 1'795'000'000'000);
  EXPECT_EQ(e.last_active_ms, 1'790'000'000'000);
}

struct BadEntryCase {
  const char* name;
  std::string fields;  // inserted into an otherwise valid entry
  const char* reason;  // part of the rejection's reason
};

class EntryCodecRejects : public ::testing::TestWithParam<BadEntryCase> {};

TEST_P(EntryCodecRejects, WithTheReasonSaid) {
  const BadEntryCase& c = GetParam();
  const std::string text = R"({"gpus":[0],"per_gpu":5,)" + c.fields + "}";
  EXPECT_THAT(Rejection(text), HasSubstr(c.reason)) << text;
}

INSTANTIATE_TEST_SUITE_P(
    EntryCodec, EntryCodecRejects,
    ::testing::Values(
        BadEntryCase{"PriorityAboveInt32", R"("priority":2147483648)", R"("priority" is not a 32-bit integer)"},
        BadEntryCase{"PriorityBelowInt32", R"("priority":-2147483649)", R"("priority" is not a 32-bit integer)"},
        BadEntryCase{"PriorityFraction", R"("priority":1.5)", R"("priority" is not a 32-bit integer)"},
        BadEntryCase{"PriorityText", R"("priority":"high")", R"("priority" is not a 32-bit integer)"},
        BadEntryCase{"PriorityClassTooLong", R"("priority_class":")" + std::string(254, 'c') + "\"",
                     R"("priority_class" is longer than 253 bytes)"},
        BadEntryCase{"PriorityClassNumber", R"("priority_class":5)", R"(a non-string "priority_class")"},
        BadEntryCase{"VictimText", R"("victim":"true")", R"("victim" is not true or false)"},
        BadEntryCase{"VictimNumber", R"("victim":1)", R"("victim" is not true or false)"},
        BadEntryCase{"UsedNegative", R"("used":-1)", R"("used" is not a byte count from 0 to 1 PiB)"},
        BadEntryCase{"UsedAbovePiB", R"("used":1125899906842625)", R"("used" is not a byte count from 0 to 1 PiB)"},
        BadEntryCase{"UsedQuantityText", R"("used":"1Gi")", R"("used" is not an integer)"},
        BadEntryCase{"UsedHuge", R"("used":1e300)", R"("used" is not an integer)"},
        BadEntryCase{"UsedTimeNegative", R"("used_ts_ms":-5)", R"("used_ts_ms" is not a time from 0 to the year 9999)"},
        BadEntryCase{"UsedTimeAfter9999", R"("used_ts_ms":253402300800000)",
                     R"("used_ts_ms" is not a time from 0 to the year 9999)"},
        BadEntryCase{"LastActiveNegative", R"("last_active_ms":-1)",
                     R"("last_active_ms" is not a time from 0 to the year 9999)"},
        BadEntryCase{"LastActiveAfter9999", R"("last_active_ms":9007199254740991)",
                     R"("last_active_ms" is not a time from 0 to the year 9999)"},
        BadEntryCase{"LastActiveObject", R"("last_active_ms":{})", R"("last_active_ms" is not an integer)"},
        BadEntryCase{"IdleTtlNegative", R"("idle_ttl_ms":-1)", R"("idle_ttl_ms" is not a duration from 0 to 30 days)"},
        BadEntryCase{"IdleTtlAbove30Days", R"("idle_ttl_ms":2592000001)",
                     R"("idle_ttl_ms" is not a duration from 0 to 30 days)"},
        BadEntryCase{"IdleTtlText", R"("idle_ttl_ms":"10m")", R"("idle_ttl_ms" is not an integer)"},
        BadEntryCase{"OwnerKindNumber", R"("owner_kind":5)", R"(a non-string "owner_kind")"},
        BadEntryCase{"OwnerUidTooLong", R"("owner_uid":")" + std::string(254, 'u') + "\"",
                     R"("owner_kind" or "owner_uid" is longer than 253 bytes)"},
        BadEntryCase{"GangTooLong", R"("gang":")" + std::string(301, 'g') + "\"", R"("gang" is longer than 300 bytes)"},
        BadEntryCase{"GangArray", R"("gang":["job/x"])", R"(a non-string "gang")"},
        BadEntryCase{"EvictableText", R"("evictable":"true")", R"("evictable" is not true or false)"}),
    [](const ::testing::TestParamInfo<BadEntryCase>& info) { return std::string(info.param.name); });

// The store checks entries with the same bounds before writing them, so a
// write never stores what a read would skip.
TEST(EntryCodec, FieldProblemsAreTheDecodersBounds) {
  EXPECT_EQ(EntryFieldProblem(Everything()), "");
  EXPECT_EQ(EntryFieldProblem(Entry{}), "");
  const auto with = [](auto change) {
    Entry e = Everything();
    change(e);
    return EntryFieldProblem(e);
  };
  EXPECT_THAT(with([](Entry& e) { e.priority_class.assign(254, 'c'); }), HasSubstr("priority_class"));
  EXPECT_THAT(with([](Entry& e) { e.used = -1; }), HasSubstr("\"used\""));
  EXPECT_THAT(with([](Entry& e) { e.used = ledger::kMaxBytesPerGpu + 1; }), HasSubstr("\"used\""));
  EXPECT_THAT(with([](Entry& e) { e.used_ts_ms = -1; }), HasSubstr("used_ts_ms"));
  EXPECT_THAT(with([](Entry& e) { e.used_ts_ms = kMaxEntryTimeMs + 1; }), HasSubstr("used_ts_ms"));
  EXPECT_THAT(with([](Entry& e) { e.last_active_ms = -1; }), HasSubstr("last_active_ms"));
  EXPECT_THAT(with([](Entry& e) { e.last_active_ms = kMaxEntryTimeMs + 1; }), HasSubstr("last_active_ms"));
  EXPECT_THAT(with([](Entry& e) { e.owner_kind.assign(254, 'k'); }), HasSubstr("owner_kind"));
  EXPECT_THAT(with([](Entry& e) { e.owner_uid.assign(254, 'u'); }), HasSubstr("owner_uid"));
  EXPECT_THAT(with([](Entry& e) { e.gang.assign(301, 'g'); }), HasSubstr("gang"));
}

// Compatibility: entries exactly as vramd 0.1 wrote them.
TEST(EntryCodec, ReadsEveryEntryVersion01WroteWithoutLoss) {
  const std::vector<std::string> lines = testing::EntriesV01Lines();
  const std::vector<Entry> want = testing::EntriesV01();
  ASSERT_EQ(lines.size(), want.size()) << testing::EntriesV01Path();
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i + 1) + ": " + lines[i]);
    EXPECT_EQ(MustDecode(lines[i], testing::EntriesV01Uid(i)), want[i]);
  }
}

TEST(EntryCodec, RewritesVersion01EntriesByteForByte) {
  const std::vector<std::string> lines = testing::EntriesV01Lines();
  ASSERT_FALSE(lines.empty()) << testing::EntriesV01Path();
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(EncodeEntry(MustDecode(lines[i]), false), lines[i]) << "line " << i + 1;
  }
}

}  // namespace
}  // namespace vramd::store
