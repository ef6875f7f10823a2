#include "store/ledger_decode.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace vramd::store {
namespace {

using ledger::Entry;

// Hash replies alternate field, value.
bool IsHash(const Reply& r) {
  return r.type == Reply::Type::kArray && r.elements.size() % 2 == 0;
}

ledger::Gpu* FindGpu(ledger::Node* node, int index) {
  auto it = std::lower_bound(node->gpus.begin(), node->gpus.end(), index,
                             [](const ledger::Gpu& g, int i) { return g.index < i; });
  return it != node->gpus.end() && it->index == index ? &*it : nullptr;
}

}  // namespace

bool ParseInt64(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseIndex(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

bool ParseScore(std::string_view s, uint64_t* out) {
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  if (!(d >= 0 && d < 9007199254740992.0) || d != static_cast<double>(static_cast<uint64_t>(d))) {
    return false;
  }
  *out = static_cast<uint64_t>(d);
  return true;
}

Result<uint64_t> ParseEpoch(const Reply& r, const std::string& key) {
  if (r.is_nil()) return uint64_t{0};
  int64_t v = 0;
  if (r.type == Reply::Type::kString && ParseInt64(r.str, &v) && v >= 0) {
    return static_cast<uint64_t>(v);
  }
  return Internal("valkey key " + key + " is not a counter" + (r.is_error() ? ": " + r.str : std::string()));
}

void BuildNode(ledger::Node* node, Reply& cap, Reply& alloc, const Reply& used, const Reply& models,
               EntryDecoder* decoder, Problems* problems) {
  const std::string& name = node->name;
  if (!IsHash(cap)) {
    problems->Add("node " + name + ": capacity key is not a hash");
  } else {
    node->gpus.reserve(cap.elements.size() / 2);
    std::vector<std::pair<int, std::string*>> uuids;
    for (size_t i = 0; i < cap.elements.size(); i += 2) {
      const std::string& f = cap.elements[i].str;
      std::string& v = cap.elements[i + 1].str;
      ledger::Gpu g;
      if (f.starts_with("uuid:")) {
        int idx = 0;
        if (ParseIndex(std::string_view(f).substr(5), &idx)) {
          uuids.emplace_back(idx, &v);
        } else {
          problems->Add("node " + name + ": capacity field '" + f + "' is not uuid:<index>");
        }
        continue;
      }
      if (!ParseIndex(f, &g.index)) {
        problems->Add("node " + name + ": capacity field '" + f + "' is not a GPU index");
        continue;
      }
      if (!ParseInt64(v, &g.capacity) || g.capacity < 0) {
        problems->Add("node " + name + ": capacity of GPU " + f + " is not a byte count: '" +
                      v + "'");
        continue;
      }
      node->gpus.push_back(std::move(g));
    }
    std::sort(node->gpus.begin(), node->gpus.end(),
              [](const ledger::Gpu& a, const ledger::Gpu& b) { return a.index < b.index; });
    for (auto& [idx, uuid] : uuids) {
      if (ledger::Gpu* g = FindGpu(node, idx)) g->uuid = std::move(*uuid);
    }
  }

  if (!IsHash(used)) {
    problems->Add("node " + name + ": usage key is not a hash");
  } else if (!used.elements.empty()) {
    int64_t ts = 0;
    for (size_t i = 0; i < used.elements.size(); i += 2) {
      if (used.elements[i].str == "ts" && !ParseInt64(used.elements[i + 1].str, &ts)) {
        problems->Add("node " + name + ": usage time is not a number");
      }
    }
    for (size_t i = 0; i < used.elements.size(); i += 2) {
      const std::string& f = used.elements[i].str;
      if (f == "ts") continue;
      int idx = 0;
      int64_t bytes = 0;
      if (!ParseIndex(f, &idx) || !ParseInt64(used.elements[i + 1].str, &bytes) || bytes < 0) {
        problems->Add("node " + name + ": usage field '" + f + "' is malformed");
        continue;
      }
      if (ledger::Gpu* g = FindGpu(node, idx)) {
        g->used = bytes;
        g->used_ts_ms = ts;
      }
    }
  }

  if (!IsHash(alloc)) {
    problems->Add("node " + name + ": allocation key is not a hash");
  } else {
    node->entries.reserve(alloc.elements.size() / 2);
    std::string why;
    for (size_t i = 0; i < alloc.elements.size(); i += 2) {
      Entry e;
      if (!decoder->Decode(alloc.elements[i + 1].str, &e, &why)) {
        problems->Add("node " + name + ": entry of pod " + alloc.elements[i].str + " skipped: " +
                      why);
        continue;
      }
      e.pod_uid = std::move(alloc.elements[i].str);
      node->entries.push_back(std::move(e));
    }
    // Oldest first (ties by UID), so snapshots are deterministic. Fields
    // mostly come back in insertion order, already sorted.
    const auto older = [](const Entry& a, const Entry& b) {
      return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.pod_uid < b.pod_uid;
    };
    if (!std::is_sorted(node->entries.begin(), node->entries.end(), older)) {
      std::sort(node->entries.begin(), node->entries.end(), older);
    }
  }

  if (!IsHash(models)) {
    problems->Add("node " + name + ": models key is not a hash");
  } else {
    for (size_t i = 0; i < models.elements.size(); i += 2) {
      int64_t ms = 0;
      if (!ParseInt64(models.elements[i + 1].str, &ms)) {
        problems->Add("node " + name + ": time of model '" + models.elements[i].str +
                      "' is not a number");
        continue;
      }
      node->models.emplace(models.elements[i].str, ms);
    }
  }
}

}  // namespace vramd::store
