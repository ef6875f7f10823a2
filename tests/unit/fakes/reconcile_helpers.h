// Small helpers shared by the reconcile unit tests: a kube client whose pod
// watch stays open and quiet (a PodWatcher lists once and stays synced), and
// one sample's value from a metrics registry.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "fakes/fake_kube_client.h"
#include "vramd/metrics/registry.h"

namespace vramd::testing {

class QuietWatchKube : public FakeKubeClient {
 public:
  Status WatchPods(const std::string&, const std::atomic<bool>& stop,
                   const std::function<void(const kube::WatchEvent<kube::PodInfo>&)>&) override {
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Status::Ok();
  }
};

// The value of one sample in the registry's text ("" when absent).
inline std::string Sample(const metrics::Registry& r, const std::string& series) {
  const std::string text = r.Render();
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  at += series.size() + 2;
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace vramd::testing
