// The fit rule's table (tests/data/fit_cases.json) against the reserve
// script (src/store/lua/fit.lua + reserve.lua) on a real server: each case's
// node is set up through the store (SetCapacity, PutEntry, PushUsage), then
// reserved on each GPU alone, on every GPU at once and on the GPUs the C++
// rule chooses; the verdicts and the refusal reasons (worded by the ledger
// from the numbers the script returns) must be the table's. The same table
// runs against the C++ rule in tests/unit/ledger/fit_test.cc, so a change of
// the rule made in one and not the other fails one of the two.
// Needs VRAMD_TEST_VALKEY_URL (e.g. redis://127.0.0.1:16399).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>

#include "fit_cases.h"
#include "integration/shared_server.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

using testing::FitCase;
using testing::FitUsage;

const std::vector<FitCase>& Cases() {
  static const std::vector<FitCase> cases = [] {
    std::string error;
    return testing::LoadFitCases(&error);
  }();
  return cases;
}

TEST(FitLuaTable, IsReadable) {
  std::string error;
  EXPECT_FALSE(testing::LoadFitCases(&error).empty()) << error;
}

class FitLuaTest : public ::testing::TestWithParam<FitCase> {
 protected:
  void SetUp() override {
    std::optional<ValkeyOptions> o = itest::SharedServerOptions(2);
    if (!o) GTEST_FAIL() << itest::kNoSharedServer;
    opts_ = *o;
    client_ = NewValkeyClient(opts_);
    store_ = NewValkeyLedgerStore(client_);
    Status ping = store_->Ping();
    ASSERT_TRUE(ping.ok()) << ping.ToString();
  }

  void TearDown() override {
    if (!client_) return;
    itest::DeleteKeys(*client_, opts_.key_prefix);
  }

  // Reserves c.per_gpu on `gpus` of `node` under the case's policy: "reserved"
  // (and released again) or the refusal's reason; anything else fails.
  std::string Reserve(const FitCase& c, const std::string& node, const std::string& uid, std::vector<int> gpus) {
    ReserveRequest req;
    req.node = node;
    req.entry.pod_uid = uid;
    req.entry.ns = "default";
    req.entry.name = uid;
    req.entry.gpus = std::move(gpus);
    req.entry.per_gpu = c.per_gpu;
    req.entry.peak_per_gpu = c.peak_per_gpu;
    req.entry.victim = c.victim;
    req.fit_on_usage = c.policy.count_usage;
    req.usage_max_age_ms = c.policy.usage_max_age_ms;
    req.max_peak_ratio = c.policy.max_peak_ratio;
    Result<ReserveOutcome> r = store_->Reserve(req);
    if (r.ok()) {
      EXPECT_EQ(*r, ReserveOutcome::kReserved);
      Result<bool> released = store_->Release(node, uid);
      EXPECT_TRUE(released.ok() && *released) << uid;
      return "reserved";
    }
    EXPECT_EQ(r.status().code(), Code::kInsufficient) << r.status().ToString();
    return r.status().message();
  }

  ValkeyOptions opts_;
  std::shared_ptr<ValkeyClient> client_;
  std::shared_ptr<LedgerStore> store_;
};

TEST_P(FitLuaTest, TheReserveScriptFitsAsTheTableSays) {
  const FitCase& c = GetParam();
  const std::string node = "fit-node";
  std::vector<GpuCapacity> caps;
  std::map<int, int64_t> used;
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    const int gpu = static_cast<int>(i);
    caps.push_back({gpu, c.gpus[i].capacity, ""});
    if (c.gpus[i].used) used[gpu] = *c.gpus[i].used;
  }
  ASSERT_TRUE(store_->SetCapacity(node, caps).ok());
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    for (size_t k = 0; k < c.gpus[i].held.size(); ++k) {
      const testing::FitHeld& h = c.gpus[i].held[k];
      ledger::Entry e;
      e.pod_uid = "held-" + std::to_string(i) + (k > 0 ? "-" + std::to_string(k) : "");
      e.ns = "default";
      e.name = e.pod_uid;
      e.gpus = {static_cast<int>(i)};
      e.per_gpu = h.per_gpu;
      e.peak_per_gpu = h.peak_per_gpu;
      e.victim = h.victim;
      e.state = ledger::EntryState::kBound;
      Status s = store_->PutEntry(node, e);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  if (c.usage != FitUsage::kNone) {
    Status s = store_->PushUsage(node, used);  // stamped with the server's time: fresh
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (c.usage == FitUsage::kStale) {
      // The same report, stamped in 1970: older than any usage max age.
      auto r = client_->Command({"HSET", opts_.key_prefix + ":{" + node + "}:used", "ts", "1000"});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    } else if (c.usage == FitUsage::kAhead || c.usage == FitUsage::kFuture) {
      // The same report, stamped a second or an hour ahead of the server's clock.
      auto t = client_->Command({"TIME"});
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ASSERT_EQ(t->elements.size(), 2u);
      const int64_t now = std::stoll(t->elements[0].str) * 1000 + std::stoll(t->elements[1].str) / 1000;
      const int64_t ts = now + (c.usage == FitUsage::kAhead ? 1000 : 3'600'000);
      auto r = client_->Command({"HSET", opts_.key_prefix + ":{" + node + "}:used", "ts", std::to_string(ts)});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  for (size_t i = 0; i < c.gpus.size(); ++i) {
    const bool room = std::find(c.room.begin(), c.room.end(), static_cast<int>(i)) != c.room.end();
    EXPECT_EQ(Reserve(c, node, "probe", {static_cast<int>(i)}),
              room ? std::string("reserved") : c.refused.at(static_cast<int>(i)))
        << "GPU " << i;
  }
  if (c.reserve_all) {
    std::vector<int> all;
    for (size_t i = 0; i < c.gpus.size(); ++i) all.push_back(static_cast<int>(i));
    EXPECT_EQ(Reserve(c, node, "probe-all", all), *c.reserve_all);
  }
  if (c.verdict == ledger::Verdict::kFits) {
    EXPECT_EQ(Reserve(c, node, "probe-headroom", c.headroom), "reserved");
    EXPECT_EQ(Reserve(c, node, "probe-binpack", c.binpack), "reserved");
  }
}

INSTANTIATE_TEST_SUITE_P(Table, FitLuaTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FitCase>& info) { return info.param.name; });

}  // namespace
}  // namespace vramd::store
