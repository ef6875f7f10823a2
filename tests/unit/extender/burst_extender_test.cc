// The extender and the peak rule: filter refuses a burst that no designated
// victim covers with fit.h's reason, bind reserves through the store's rule,
// and the configured victim classes (Options::policy) decide who is a victim.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fakes/fake_ledger_store.h"
#include "vramd/clock.h"
#include "vramd/extender/extender.h"
#include "vramd/metrics/registry.h"

namespace vramd::extender {
namespace {

using nlohmann::json;

constexpr int64_t kGi = int64_t{1} << 30;

class FixedClock : public Clock {
 public:
  int64_t NowMs() const override { return 1'000'000; }
};

std::string FilterBody(const std::string& uid, const std::string& vram, const std::string& peak,
                       const std::string& priority_class) {
  json pod = {{"metadata", {{"name", "p-" + uid}, {"namespace", "default"}, {"uid", uid}}},
              {"spec", {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", vram}}}}}}})}}}};
  if (!peak.empty()) pod["metadata"]["annotations"] = {{"vramd.io/vram-peak", peak}};
  if (!priority_class.empty()) pod["spec"]["priorityClassName"] = priority_class;
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", json::array({"n"})}}.dump();
}

std::string BindBody(const std::string& uid) {
  return json{{"PodName", "p-" + uid}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", "n"}}.dump();
}

Options WithClasses(std::vector<std::string> classes) {
  Options o;
  o.policy.victim_classes = std::move(classes);
  return o;
}

class BurstExtender : public ::testing::Test {
 protected:
  void SetUp() override { store.AddNode("n", {24 * kGi}); }
  testing::FakeLedgerStore store;
  FixedClock clock;
  metrics::Registry registry;
};

TEST_F(BurstExtender, ABurstNoVictimCoversIsRefusedByFilterAndBind) {
  Extender ext{Options{}, &store, nullptr, &clock, &registry};
  const json f = json::parse(ext.Filter(FilterBody("u1", "8Gi", "32Gi", "")).body);
  EXPECT_TRUE(f["NodeNames"].empty());
  EXPECT_EQ(f["FailedNodes"]["n"],
            "no GPU with 8Gi free stays within the peak rule now (peak 32Gi)");
  const std::string err = json::parse(ext.Bind(BindBody("u1")).body)["Error"];
  EXPECT_NE(err.find("peak demand would be 32Gi over capacity 24Gi"), std::string::npos) << err;
  EXPECT_TRUE(store.Entries("n").empty());
}

TEST_F(BurstExtender, AConfiguredVictimClassLetsTheDisposableTierCoverTheBurst) {
  Extender ext{WithClasses({"homelab-disposable"}), &store, nullptr, &clock, &registry};
  // The disposable tier first: a victim by the configured class.
  ASSERT_EQ(ext.Filter(FilterBody("agents", "12Gi", "", "homelab-disposable")).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("agents")).body)["Error"], "");
  ASSERT_EQ(store.Entries("n").size(), 1u);
  EXPECT_TRUE(store.Entries("n")[0].victim);
  // Then inference: request 8Gi, peak 20Gi; P 32Gi, overshoot 8Gi covered by 12Gi.
  const json f = json::parse(ext.Filter(FilterBody("inference", "8Gi", "20Gi", "")).body);
  EXPECT_EQ(f["NodeNames"], json::array({"n"})) << f.dump();
  EXPECT_EQ(json::parse(ext.Bind(BindBody("inference")).body)["Error"], "");
  EXPECT_EQ(store.Entries("n").size(), 2u);
}

TEST_F(BurstExtender, TheDefaultClassIsNoVictimWhenTheListLeavesItOut) {
  Extender ext{WithClasses({"homelab-disposable"}), &store, nullptr, &clock, &registry};
  ASSERT_EQ(ext.Filter(FilterBody("agents", "12Gi", "", "vramd-disposable")).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("agents")).body)["Error"], "");
  ASSERT_EQ(store.Entries("n").size(), 1u);
  EXPECT_FALSE(store.Entries("n")[0].victim);
  const json f = json::parse(ext.Filter(FilterBody("inference", "8Gi", "20Gi", "")).body);
  EXPECT_TRUE(f["NodeNames"].empty()) << f.dump();
}

}  // namespace
}  // namespace vramd::extender
