// Inputs shared by the benchmarks: real extender request bodies scaled to N
// node names, and synthetic ledger snapshots. Deterministic (no randomness).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "vramd/ledger/model.h"
#include "test_paths.h"  // VRAMD_TEST_DATA
#include "vramd/ledger/placement.h"

namespace vramd::bench {

inline constexpr int64_t kGi = int64_t{1} << 30;

// Node i's name. Fixed width; 14 characters, like short cloud node names.
inline std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
  return buf;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `body` (an ExtenderArgs JSON) with its NodeNames array replaced by
// NodeName(0) .. NodeName(n - 1).
inline std::string ScaleNodeNames(std::string_view body, int n) {
  static constexpr std::string_view kKey = "\"NodeNames\":[";
  size_t start = body.find(kKey);
  if (start == std::string_view::npos) throw std::runtime_error("body has no NodeNames array");
  size_t open = start + kKey.size();
  size_t close = body.find(']', open);
  std::string out(body.substr(0, open));
  out.reserve(body.size() + static_cast<size_t>(n) * 17);
  for (int i = 0; i < n; ++i) {
    if (i) out += ',';
    out += '"';
    out += NodeName(i);
    out += '"';
  }
  out += body.substr(close);
  return out;
}

// A fixture of tests/data/extender scaled to n names.
inline std::string FixtureBody(const std::string& file, int n) {
  return ScaleNodeNames(ReadFile(std::string(VRAMD_TEST_DATA) + "/extender/" + file), n);
}

// n nodes with `gpus` GPUs of 80Gi each. Odd nodes are full: one entry per
// GPU holds all of it. Even nodes hold one 16Gi entry on GPU 0 (so fits are
// not all identical). Entry models alternate so the warm check has work.
// With `index`, the snapshot is indexed as the Valkey store publishes it.
inline ledger::Snapshot MakeSnapshot(int n, int gpus, bool index = true, bool half_full = true) {
  ledger::Snapshot snap;
  snap.epoch = 1;
  snap.nodes.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    ledger::Node node;
    node.name = NodeName(i);
    for (int g = 0; g < gpus; ++g) {
      ledger::Gpu gpu;
      gpu.index = g;
      gpu.capacity = 80 * kGi;
      node.gpus.push_back(gpu);
    }
    auto add = [&](int g, int64_t bytes, int k) {
      ledger::Entry e;
      e.pod_uid = "uid-" + std::to_string(i) + "-" + std::to_string(k);
      e.ns = "default";
      e.name = "pod-" + std::to_string(i) + "-" + std::to_string(k);
      e.gpus = {g};
      e.per_gpu = bytes;
      e.peak_per_gpu = bytes;
      e.model = k % 2 ? "llama-70b" : "qwen-32b";
      e.state = ledger::EntryState::kBound;
      e.created_ms = 1'700'000'000'000 + k;
      node.entries.push_back(std::move(e));
    };
    if (half_full && i % 2 == 1) {
      for (int g = 0; g < gpus; ++g) add(g, 80 * kGi, g);
    } else {
      add(0, 16 * kGi, 0);
    }
    snap.nodes.emplace(node.name, std::move(node));
  }
  if (index) ledger::IndexSnapshot(&snap);
  return snap;
}

// MakeSnapshot where every GPU has a fresh usage report at `now_ms` (as
// with the node agent on every node): its allocation plus 1Gi in use.
inline ledger::Snapshot MakeSnapshotWithUsage(int n, int gpus, int64_t now_ms, bool index = true) {
  ledger::Snapshot snap = MakeSnapshot(n, gpus, /*index=*/false);
  for (auto& [name, node] : snap.nodes) {
    for (ledger::Gpu& g : node.gpus) {
      g.used = kGi;
      for (const ledger::Entry& e : node.entries) {
        if (e.gpus[0] == g.index) g.used += e.per_gpu;
      }
      g.used_ts_ms = now_ms - 1000;
    }
  }
  if (index) ledger::IndexSnapshot(&snap);
  return snap;
}

}  // namespace vramd::bench
