// DecodeQueue (VramQueue objects, untrusted) and QueueStatusPatch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vramd/kube/decode.h"

namespace vramd::kube {
namespace {

using nlohmann::json;
constexpr int64_t kGi = int64_t{1} << 30;

// A VramQueue object with `spec` (JSON text) and the usual metadata.
std::string Queue(const std::string& spec, const std::string& name = "\"team-a\"") {
  return R"({"apiVersion":"vramd.io/v1alpha1","kind":"VramQueue","metadata":{"name":)" + name +
         R"(,"uid":"u-1","resourceVersion":"7","creationTimestamp":"2026-11-24T20:12:21Z"},"spec":)" + spec + "}";
}

TEST(DecodeQueue, AFullObject) {
  ledger::QueueSpec q = DecodeQueue(Queue(
      R"({"parent":"research","namespaces":["ml","vision"],"deserved":"16Gi","limit":"32Gi","overQuotaWeight":3})"));
  EXPECT_EQ(q.decode_error, "");
  EXPECT_EQ(q.name, "team-a");
  EXPECT_EQ(q.uid, "u-1");
  EXPECT_EQ(q.created_ms, int64_t{1795551141} * 1000);  // date -d 2026-11-24T20:12:21Z +%s
  EXPECT_EQ(q.parent, "research");
  EXPECT_EQ(q.namespaces, (std::vector<std::string>{"ml", "vision"}));
  EXPECT_EQ(q.deserved, 16 * kGi);
  EXPECT_EQ(q.limit, 32 * kGi);
  EXPECT_EQ(q.weight, 3);
}

TEST(DecodeQueue, DefaultsForOptionalFields) {
  ledger::QueueSpec q = DecodeQueue(R"({"metadata":{"name":"q"},"spec":{"deserved":0}})");
  EXPECT_EQ(q.decode_error, "");
  EXPECT_EQ(q.name, "q");
  EXPECT_EQ(q.uid, "");
  EXPECT_EQ(q.created_ms, 0);
  EXPECT_EQ(q.parent, "");
  EXPECT_TRUE(q.namespaces.empty());
  EXPECT_EQ(q.deserved, 0);
  EXPECT_FALSE(q.limit.has_value());
  EXPECT_EQ(q.weight, 1);
}

// One object per row: what it decodes to, or which field the error names.
struct Case {
  const char* name;
  std::string object;
  std::string error;              // a part of decode_error; "" = no error
  bool named = true;              // the name is readable (the object is kept)
  std::function<void(const ledger::QueueSpec&)> check = nullptr;
};

TEST(DecodeQueue, GoodAndHostileObjects) {
  std::string many_namespaces = "[";
  for (int i = 0; i < 10000; ++i) many_namespaces += (i ? ",\"ns-" : "\"ns-") + std::to_string(i) + "\"";
  many_namespaces += "]";
  std::string max_namespaces = "[";
  for (size_t i = 0; i < ledger::kMaxQueueNamespaces; ++i) {
    max_namespaces += (i ? ",\"n" : "\"n") + std::to_string(i) + "\"";
  }
  max_namespaces += "]";

  const std::vector<Case> cases = {
      {"IntegerBytes", Queue(R"({"deserved":1073741824,"limit":2147483648})"), "", true,
       [](const ledger::QueueSpec& q) {
         EXPECT_EQ(q.deserved, kGi);
         EXPECT_EQ(q.limit, 2 * kGi);
       }},
      {"WholeFloatIsAnInteger", Queue(R"({"deserved":1024.0,"overQuotaWeight":2.0})"), "", true,
       [](const ledger::QueueSpec& q) {
         EXPECT_EQ(q.deserved, 1024);
         EXPECT_EQ(q.weight, 2);
       }},
      {"DecimalQuantity", Queue(R"({"deserved":"1500M"})"), "", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.deserved, 1500000000); }},
      {"DeservedAboveLimitIsNotADecodeError", Queue(R"({"deserved":"64Gi","limit":"32Gi"})"), "", true,
       [](const ledger::QueueSpec& q) {
         EXPECT_EQ(q.deserved, 64 * kGi);
         EXPECT_EQ(q.limit, 32 * kGi);
       }},
      {"NullLimitAndWeightTakeDefaults",
       Queue(R"({"deserved":"1Gi","limit":null,"overQuotaWeight":null,"parent":null})"), "", true,
       [](const ledger::QueueSpec& q) {
         EXPECT_FALSE(q.limit.has_value());
         EXPECT_EQ(q.weight, 1);
       }},
      {"WeightZeroAndMax", Queue(R"({"deserved":"1Gi","overQuotaWeight":1000000})"), "", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.weight, ledger::kMaxQueueWeight); }},
      {"RepeatedNamespaceKeptOnce", Queue(R"({"deserved":"1Gi","namespaces":["a","b","a"]})"), "", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.namespaces, (std::vector<std::string>{"a", "b"})); }},
      {"ExactlyTheMaximumOfNamespaces", Queue(R"({"deserved":"1Gi","namespaces":)" + max_namespaces + "}"), "", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.namespaces.size(), ledger::kMaxQueueNamespaces); }},
      {"UnknownFieldsIgnored", Queue(R"({"deserved":"1Gi","future":{"x":[1,2]}})"), "", true, nullptr},
      {"TimestampWithFractionAndOffset",
       R"({"metadata":{"name":"q","creationTimestamp":"2026-11-24T21:12:21.250+01:00"},"spec":{"deserved":1}})", "",
       true, [](const ledger::QueueSpec& q) { EXPECT_EQ(q.created_ms, int64_t{1795551141} * 1000 + 250); }},
      {"TimestampOfAnEarlierEpochDay",
       R"({"metadata":{"name":"q","creationTimestamp":"1970-01-02T00:00:00Z"},"spec":{"deserved":1}})", "", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.created_ms, 86400000); }},

      // The object itself.
      {"NotJson", "{\"metadata\":", "not valid JSON", false},
      {"NotAnObject", "[1,2]", "expected a JSON object, got array", false},
      {"NoMetadata", R"({"spec":{"deserved":"1Gi"}})", "metadata: missing", false},
      {"MetadataNotAnObject", R"({"metadata":"q","spec":{"deserved":"1Gi"}})", "metadata: expected object, got string",
       false},
      {"NoName", R"({"metadata":{"uid":"u"},"spec":{"deserved":"1Gi"}})", "metadata.name: missing", false},
      {"NameOfWrongType", R"({"metadata":{"name":7},"spec":{"deserved":"1Gi"}})",
       "metadata.name: expected string, got number", false},
      {"NameWithASlash", Queue(R"({"deserved":"1Gi"})", R"("team/../x")"), "\"team/../x\" is not an object name",
       false},
      {"NameWithAControlCharacter", Queue(R"({"deserved":"1Gi"})", R"("team\na")"), "is not an object name", false},
      {"NameDotDot", Queue(R"({"deserved":"1Gi"})", R"("..")"), "is not an object name", false},
      {"NameEmpty", Queue(R"({"deserved":"1Gi"})", R"("")"), "is not an object name", false},
      {"NameTooLong", Queue(R"({"deserved":"1Gi"})", "\"" + std::string(254, 'a') + "\""), "is not an object name",
       false},
      {"NameNotASubdomainIsKeptInvalid", Queue(R"({"deserved":"1Gi"})", R"("Team_A")"),
       "metadata.name: \"Team_A\" is not a DNS subdomain", true,
       [](const ledger::QueueSpec& q) { EXPECT_EQ(q.name, "Team_A"); }},
      {"UidOfWrongType", R"({"metadata":{"name":"q","uid":{}},"spec":{"deserved":1}})",
       "metadata.uid: expected string, got object"},
      {"BadTimestamp", R"({"metadata":{"name":"q","creationTimestamp":"yesterday"},"spec":{"deserved":1}})",
       "metadata.creationTimestamp: \"yesterday\" is not an RFC 3339 time"},
      {"TimestampFebruary30",
       R"({"metadata":{"name":"q","creationTimestamp":"2026-02-30T00:00:00Z"},"spec":{"deserved":1}})",
       "metadata.creationTimestamp"},

      // spec.
      {"MissingSpec", R"({"metadata":{"name":"q"}})", "spec: missing"},
      {"SpecNotAnObject", Queue("[]"), "spec: expected object, got array"},
      {"MissingDeserved", Queue(R"({"limit":"1Gi"})"), "spec.deserved: missing"},
      {"DeservedOfWrongType", Queue(R"({"deserved":true})"),
       "spec.deserved: expected a quantity (string or integer), got boolean"},
      {"DeservedNegativeNumber", Queue(R"({"deserved":-5})"), "spec.deserved: -5 is negative"},
      {"DeservedNegativeQuantity", Queue(R"({"deserved":"-5Gi"})"), "spec.deserved:"},
      {"DeservedNotAQuantity", Queue(R"({"deserved":"lots"})"), "spec.deserved:"},
      {"DeservedFractionOfAByte", Queue(R"({"deserved":0.5})"), "spec.deserved: 0.5 is not a whole number of bytes"},
      {"DeservedHugeNumber", Queue(R"({"deserved":18446744073709551615})"),
       "spec.deserved: 18446744073709551615 is above the maximum of 4Ei"},
      {"DeservedJustAboveTheMaximum", Queue(R"({"deserved":4611686018427387905})"),
       "spec.deserved: 4611686018427387905 is above the maximum of 4Ei (4611686018427387904 bytes)"},
      {"DeservedHugeFloat", Queue(R"({"deserved":1e300})"), "spec.deserved: 1e+300 is above the maximum"},
      {"DeservedHugeNegativeFloat", Queue(R"({"deserved":-1e300})"), "spec.deserved: -1e+300 is negative"},
      {"DeservedAboveTheMaximum", Queue(R"({"deserved":"5Ei"})"), "spec.deserved: \"5Ei\" is above the maximum of 4Ei"},
      {"DeservedLongString", Queue(R"({"deserved":")" + std::string(100000, '9') + "\"}"), "spec.deserved:"},
      {"LimitOfWrongType", Queue(R"({"deserved":"1Gi","limit":{"max":1}})"), "spec.limit: expected a quantity"},
      {"LimitNegative", Queue(R"({"deserved":"1Gi","limit":-1})"), "spec.limit: -1 is negative"},
      {"WeightNegative", Queue(R"({"deserved":"1Gi","overQuotaWeight":-1})"),
       "spec.overQuotaWeight: -1 is not an integer from 0 to 1000000"},
      {"WeightTooLarge", Queue(R"({"deserved":"1Gi","overQuotaWeight":1000001})"), "spec.overQuotaWeight: 1000001"},
      {"WeightFraction", Queue(R"({"deserved":"1Gi","overQuotaWeight":1.5})"), "spec.overQuotaWeight: 1.5"},
      {"WeightString", Queue(R"({"deserved":"1Gi","overQuotaWeight":"3"})"),
       "spec.overQuotaWeight: expected integer, got string"},
      {"ParentOfWrongType", Queue(R"({"deserved":"1Gi","parent":["a"]})"), "spec.parent: expected string, got array"},
      {"ParentNotAName", Queue(R"({"deserved":"1Gi","parent":"Research Dept"})"), "spec.parent: \"Research Dept\""},
      {"NamespacesNotAnArray", Queue(R"({"deserved":"1Gi","namespaces":"ml"})"),
       "spec.namespaces: expected array, got string"},
      {"NamespaceOfWrongType", Queue(R"({"deserved":"1Gi","namespaces":["ml",3]})"),
       "spec.namespaces[1]: expected string, got number"},
      {"NamespaceUppercase", Queue(R"({"deserved":"1Gi","namespaces":["ML"]})"),
       "spec.namespaces[0]: \"ML\" is not a namespace name"},
      {"NamespaceWithADot", Queue(R"({"deserved":"1Gi","namespaces":["a.b"]})"), "spec.namespaces[0]"},
      {"NamespaceEmpty", Queue(R"({"deserved":"1Gi","namespaces":[""]})"), "spec.namespaces[0]"},
      {"NamespaceTooLong", Queue(R"({"deserved":"1Gi","namespaces":[")" + std::string(64, 'a') + "\"]}"),
       "spec.namespaces[0]"},
      {"NamespaceWithControlCharacters", Queue(R"({"deserved":"1Gi","namespaces":["a\u0000b\n"]})"),
       "spec.namespaces[0]: \"a?b?\""},
      {"TenThousandNamespaces", Queue(R"({"deserved":"1Gi","namespaces":)" + many_namespaces + "}"),
       "spec.namespaces: 10000 entries, more than the maximum of 1000"},
      {"EveryWrongFieldNamed", Queue(R"({"deserved":-1,"limit":"x","overQuotaWeight":false})"),
       "spec.deserved: -1 is negative; spec.limit:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ledger::QueueSpec q = DecodeQueue(c.object);
    if (c.error.empty()) {
      EXPECT_EQ(q.decode_error, "");
    } else {
      EXPECT_NE(q.decode_error.find(c.error), std::string::npos) << q.decode_error;
      EXPECT_LE(q.decode_error.size(), 1000u) << "messages quote at most a short excerpt";
    }
    EXPECT_EQ(!q.name.empty(), c.named) << q.name;
    if (c.check) c.check(q);
  }
}

TEST(DecodeQueue, AnErrorKeepsTheFieldsThatWereRead) {
  ledger::QueueSpec q = DecodeQueue(Queue(R"({"deserved":"8Gi","namespaces":["ml"],"overQuotaWeight":-2})"));
  EXPECT_NE(q.decode_error.find("spec.overQuotaWeight"), std::string::npos) << q.decode_error;
  EXPECT_EQ(q.name, "team-a");
  EXPECT_EQ(q.deserved, 8 * kGi);
  EXPECT_EQ(q.namespaces, std::vector<std::string>{"ml"});
  EXPECT_EQ(q.weight, 1);
}

// Every prefix of a good object, and a few mutations, decode without a crash.
TEST(DecodeQueue, TruncatedAndMutatedObjectsNeverCrash) {
  const std::string good = Queue(
      R"({"parent":"research","namespaces":["ml","vision"],"deserved":"16Gi","limit":"32Gi","overQuotaWeight":3})");
  for (size_t n = 0; n <= good.size(); ++n) {
    ledger::QueueSpec q = DecodeQueue(std::string_view(good).substr(0, n));
    if (n < good.size()) {
      EXPECT_FALSE(q.decode_error.empty()) << n;
    }
  }
  for (const char* v : {"null", "true", "1", "\"x\"", "[]", "{}", "-1", "1e400", "[null]"}) {
    for (const char* field : {"parent", "namespaces", "deserved", "limit", "overQuotaWeight"}) {
      json obj = json::parse(good);
      obj["spec"][field] = json::parse(v, nullptr, false);
      (void)DecodeQueue(obj.dump());
    }
    json obj = json::parse(good);
    obj["metadata"] = json::parse(v, nullptr, false);
    EXPECT_FALSE(DecodeQueue(obj.dump()).decode_error.empty()) << v;
  }
}

// ---- QueueStatusPatch ------------------------------------------------------

TEST(QueueStatusPatch, AValidQueueWithALimit) {
  ledger::QueueStatus st;
  st.name = "team-a";
  st.valid = true;
  st.reason = "Valid";
  st.deserved = 16 * kGi;
  st.limit = 32 * kGi;
  st.allocated = 12 * kGi;
  st.fair_share = 20 * kGi;
  st.pending = 8 * kGi;
  json got = json::parse(QueueStatusPatch(st, "2026-11-24T20:12:21Z"));
  EXPECT_EQ(got, json::parse(R"({"status":{"deserved":"16Gi","limit":"32Gi","allocated":"12Gi","fairShare":"20Gi",
      "pending":"8Gi","allocatedBytes":12884901888,"fairShareBytes":21474836480,"pendingBytes":8589934592,
      "conditions":[{"type":"Valid","status":"True","reason":"Valid",
                     "lastTransitionTime":"2026-11-24T20:12:21Z"}]}})"));  // no empty message
}

TEST(QueueStatusPatch, AnInvalidQueueWithoutALimitRemovesTheLimit) {
  ledger::QueueStatus st;
  st.valid = false;
  st.reason = "ExceedsParent";
  st.message = "deserved 40Gi is above the parent research's deserved 32Gi";
  st.deserved = 40 * kGi;
  st.fair_share = kGi + kGi / 3;  // not a whole number of Gi: FormatBytes' one decimal
  json got = json::parse(QueueStatusPatch(st, "2026-11-24T20:00:00Z"));
  const json& s = got.at("status");
  EXPECT_TRUE(s.at("limit").is_null());  // merge patch: removes an earlier limit
  EXPECT_EQ(s.at("fairShare"), "1.3Gi");
  EXPECT_EQ(s.at("fairShareBytes"), kGi + kGi / 3);
  EXPECT_EQ(s.at("allocated"), "0");
  const json& c = s.at("conditions").at(0);
  EXPECT_EQ(c.at("status"), "False");
  EXPECT_EQ(c.at("reason"), "ExceedsParent");
  EXPECT_EQ(c.at("message"), st.message);
  EXPECT_EQ(c.at("lastTransitionTime"), "2026-11-24T20:00:00Z");
}

TEST(QueueStatusPatch, HostileMessageStaysValidJsonAndShort) {
  ledger::QueueStatus st;
  st.valid = false;
  st.reason = "";  // falls back to Invalid
  st.message = std::string("spec.parent: \"\xff\xfe\" \"quoted\" \\ ") + std::string(10000, 'x');
  std::string body = QueueStatusPatch(st, "t");
  json got = json::parse(body, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(got.is_discarded()) << body.substr(0, 200);
  const json& c = got["status"]["conditions"][0];
  EXPECT_EQ(c["reason"], "Invalid");
  EXPECT_LE(c["message"].get<std::string>().size(), 4096u + 8);  // U+FFFD replacements may add a few bytes
  EXPECT_EQ(c["message"].get<std::string>().rfind("spec.parent: ", 0), 0u);
}

}  // namespace
}  // namespace vramd::kube
