// The fit rule's table of named cases (tests/data/fit_cases.json, described
// at its top), read for both tiers that run it: the C++ rule in the unit tier
// (tests/unit/ledger/fit_test.cc) and the reserve script on a real server in
// the integration tier (tests/integration/fit_lua_test.cc).
#pragma once

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/quantity.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

namespace vramd::testing {

// One entry holding a GPU (only that GPU).
struct FitHeld {
  int64_t per_gpu = 0;
  int64_t peak_per_gpu = 0;  // 0: none
  bool victim = false;
};

struct FitGpuCase {
  int64_t capacity = 0;
  int64_t allocated = 0;           // held by one entry (with `peak`, `victim`); 0: none
  std::optional<int64_t> used;     // the GPU's usage report, when it has one
  std::vector<FitHeld> held;       // every entry on the GPU: that one, then `also`
};

// kFresh: a second old; kStale: older than usage_max_age_ms; kAhead: stamped
// a second ahead of now (within ledger::kUsageFutureToleranceMs: fresh);
// kFuture: stamped an hour ahead (beyond it: stale).
enum class FitUsage { kNone, kFresh, kStale, kAhead, kFuture };

struct FitCase {
  std::string name;
  std::vector<FitGpuCase> gpus;    // GPU i has index i
  FitUsage usage = FitUsage::kNone;
  ledger::FitPolicy policy;
  int64_t per_gpu = 0;
  int64_t peak_per_gpu = 0;  // the demand's vramd.io/vram-peak per GPU; 0: none
  bool victim = false;       // the demand is a designated victim
  int count = 1;
  // Expected.
  std::vector<int> room;                 // GPUs where per_gpu fits alone
  std::map<int, std::string> refused;    // reason for each GPU not in `room`
  ledger::Verdict verdict = ledger::Verdict::kUnresolvable;
  std::vector<int> headroom, binpack;    // chosen GPUs (when it fits)
  std::string reason;                    // the node's reason (when it does not fit)
  std::string grouped;                   // Filter's grouped reason for it (GroupedReason)
  std::optional<std::string> reserve_all;  // "reserved" or the refusal reason
};

// gtest names a failing case by its name.
inline void PrintTo(const FitCase& c, std::ostream* os) { *os << c.name; }

// Reads the table; on a malformed one, returns no cases and says why.
inline std::vector<FitCase> LoadFitCases(std::string* error) {
  const std::string path = std::string(VRAMD_TEST_DATA) + "/fit_cases.json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!in || doc.is_discarded() || !doc.contains("cases")) {
    *error = path + " is missing or not the table";
    return {};
  }
  auto bytes = [](const nlohmann::json& j) -> int64_t {
    if (j.is_number_integer()) return j.get<int64_t>();
    Result<int64_t> b = ledger::ParseBytes(j.get<std::string>());
    return b.ok() ? *b : -1;
  };
  std::vector<FitCase> out;
  try {
    for (const nlohmann::json& c : doc["cases"]) {
      FitCase fc;
      fc.name = c.at("name").get<std::string>();
      for (const nlohmann::json& g : c.at("gpus")) {
        FitGpuCase gc;
        gc.capacity = bytes(g.at("capacity"));
        if (g.contains("allocated")) gc.allocated = bytes(g["allocated"]);
        if (g.contains("used")) gc.used = bytes(g["used"]);
        if (gc.allocated > 0) {
          gc.held.push_back({gc.allocated, g.contains("peak") ? bytes(g["peak"]) : 0, g.value("victim", false)});
        }
        for (const nlohmann::json& h : g.value("also", nlohmann::json::array())) {
          gc.held.push_back({bytes(h.at("per_gpu")), h.contains("peak") ? bytes(h["peak"]) : 0,
                             h.value("victim", false)});
        }
        fc.gpus.push_back(gc);
      }
      const std::string usage = c.value("usage", std::string("none"));
      fc.usage = usage == "fresh"    ? FitUsage::kFresh
                 : usage == "stale"  ? FitUsage::kStale
                 : usage == "ahead"  ? FitUsage::kAhead
                 : usage == "future" ? FitUsage::kFuture
                                     : FitUsage::kNone;
      if (c.contains("policy")) {
        fc.policy.count_usage = c["policy"].value("count_usage", fc.policy.count_usage);
        fc.policy.usage_max_age_ms = c["policy"].value("usage_max_age_ms", fc.policy.usage_max_age_ms);
        fc.policy.max_peak_ratio = c["policy"].value("max_peak_ratio", fc.policy.max_peak_ratio);
      }
      fc.per_gpu = bytes(c.at("per_gpu"));
      if (c.contains("peak_per_gpu")) fc.peak_per_gpu = bytes(c["peak_per_gpu"]);
      fc.victim = c.value("victim", false);
      fc.count = c.at("count").get<int>();
      const nlohmann::json& e = c.at("expect");
      fc.room = e.at("room").get<std::vector<int>>();
      if (e.contains("refused")) {
        for (const auto& [gpu, why] : e["refused"].items()) fc.refused[std::stoi(gpu)] = why.get<std::string>();
      }
      const std::string verdict = e.at("verdict").get<std::string>();
      fc.verdict = verdict == "fits"          ? ledger::Verdict::kFits
                   : verdict == "no_room_now" ? ledger::Verdict::kNoRoomNow
                                              : ledger::Verdict::kUnresolvable;
      fc.headroom = e.value("headroom", std::vector<int>{});
      fc.binpack = e.value("binpack", std::vector<int>{});
      fc.reason = e.value("reason", std::string());
      fc.grouped = e.value("grouped", std::string());
      if (e.contains("reserve_all")) fc.reserve_all = e["reserve_all"].get<std::string>();
      // The table's own consistency: every GPU without room has its reason,
      // usage reports only where the node has one, quantities that parse.
      bool ok = fc.per_gpu > 0 && (fc.peak_per_gpu == 0 || fc.peak_per_gpu >= fc.per_gpu) &&
                fc.policy.max_peak_ratio >= 1 && (usage == "none" || usage == "fresh" || usage == "stale" || usage == "ahead" || usage == "future") &&
                (verdict == "fits" || verdict == "no_room_now" || verdict == "never") &&
                (verdict == "fits") == fc.grouped.empty() && (verdict == "fits") == fc.reason.empty();
      for (size_t i = 0; i < fc.gpus.size(); ++i) {
        const bool has_room = std::find(fc.room.begin(), fc.room.end(), static_cast<int>(i)) != fc.room.end();
        for (const FitHeld& h : fc.gpus[i].held) ok = ok && h.per_gpu > 0 && h.peak_per_gpu >= 0;
        ok = ok && fc.gpus[i].capacity >= 0 && fc.gpus[i].allocated >= 0 &&
             (!fc.gpus[i].used || (*fc.gpus[i].used >= 0 && fc.usage != FitUsage::kNone)) &&
             has_room != (fc.refused.count(static_cast<int>(i)) > 0);
      }
      if (!ok) {
        *error = path + ": case " + fc.name + " is not consistent";
        return {};
      }
      out.push_back(std::move(fc));
    }
  } catch (const nlohmann::json::exception& ex) {
    *error = path + ": " + ex.what();
    return {};
  }
  return out;
}

}  // namespace vramd::testing
