// What tests/data/ledger/entries-v0.1.jsonl holds: the entries vramd 0.1
// encoded, line by line, as they were before encoding (pod_uid is not part
// of the text; the tests give line i the UID "v01-pod-<i>"). Shared by the
// unit and integration compatibility tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "test_paths.h"  // VRAMD_TEST_DATA
#include "vramd/ledger/model.h"

namespace vramd::testing {

inline std::string EntriesV01Path() { return std::string(VRAMD_TEST_DATA) + "/ledger/entries-v0.1.jsonl"; }

// The fixture's lines, without their newline.
inline std::vector<std::string> EntriesV01Lines() {
  std::ifstream in(EntriesV01Path());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string EntriesV01Uid(size_t line) { return "v01-pod-" + std::to_string(line); }

// The entries as written (invalid UTF-8 in a model already replaced by U+FFFD,
// as the 0.1 encoder stored it), in the fixture's order, with their UIDs.
inline std::vector<ledger::Entry> EntriesV01() {
  using ledger::EntryState;
  const auto mk = [](std::string ns, std::string name, std::vector<int> gpus, int64_t per, int64_t peak,
                     std::string model, EntryState st, int64_t created) {
    ledger::Entry e;
    e.ns = std::move(ns);
    e.name = std::move(name);
    e.gpus = std::move(gpus);
    e.per_gpu = per;
    e.peak_per_gpu = peak;
    e.model = std::move(model);
    e.state = st;
    e.created_ms = created;
    return e;
  };
  std::vector<ledger::Entry> v = {
      mk("default", "train-0", {0}, 1073741824, 1073741824, "", EntryState::kReserved, 1795000000001),
      mk("ml", "llama-70b-0", {0, 1}, 42949672960, 64424509440, "llama-3-70b", EntryState::kBound, 1795000000002),
      mk("ml-prod", "serve-unicode", {0, 2, 5, 7}, 21474836480, 21474836480, "模型-ünïcode-🚀",
         EntryState::kTerminating, 1795000000003),
      mk("ns-x", "weird-model", {3}, 512, 4096, std::string("quote\"back\\slash\nnew\ttab\x01", 25), EntryState::kBound,
         1795000000004),
      mk("ns-y", "bad-utf8", {1}, 2048, 2048, "bad\xEF\xBF\xBDutf8", EntryState::kReserved, 1795000000005),
      mk("big", "eight-gpus", {0, 1, 2, 3, 4, 5, 6, 7}, 85899345920, 9007199254740991, "mixtral", EntryState::kBound,
         1795000000006),
      mk("recon", "readded-zero", {2}, 0, 0, "", EntryState::kBound, 1795000000007),
      mk("", "", {6}, 1, 0, "", EntryState::kTerminating, 0),
      mk("default", "reserved-by-lua", {1, 3}, 3221225472, 3221225472, "qwen2", EntryState::kReserved, 1795000000009),
  };
  for (size_t i = 0; i < v.size(); ++i) v[i].pod_uid = EntriesV01Uid(i);
  return v;
}

}  // namespace vramd::testing
