// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format (version 0.0.4). Collectors add
// series computed at scrape time (the ledger's vectors and metrics).
// Thread-safe: increments are lock-free on the hot path once a child exists.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vramd/mutex.h"

namespace vramd::metrics {

using Labels = std::vector<std::string>;  // values, in the family's label order

// Writes one family's HELP/TYPE header and samples (for collectors).
class TextWriter {
 public:
  explicit TextWriter(std::string* out) : out_(out) {}
  void Header(const std::string& name, const std::string& help, const char* type);
  void Sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
              double value);

 private:
  std::string* out_;
};

// Formats a sample value as Prometheus expects (+Inf, -Inf, NaN, integers without exponent).
std::string FormatValue(double v);
// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabel(const std::string& v);

class Counter {
 public:
  void Inc(double by = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);
  // Cumulative counts per bound, then +Inf; sum.
  void Read(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const;

 private:
  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative, last = +Inf
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<T>()> make)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
        make_(std::move(make)) {}

  // The child for these label values (created on first use; stable address).
  T& With(const Labels& values);
  // Removes a child (a node that left, a lock that was freed).
  void Remove(const Labels& values);

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  template <typename F>
  void ForEach(F&& f) const {
    MutexLock lock(&mu_);
    for (const auto& [labels, child] : children_) f(labels, *child);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<T>()> make_;
  mutable Mutex mu_;
  std::map<Labels, std::unique_ptr<T>> children_ GUARDED_BY(mu_);
};

template <typename T>
T& Family<T>::With(const Labels& values) {
  MutexLock lock(&mu_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(values, make_()).first;
  return *it->second;
}

template <typename T>
void Family<T>::Remove(const Labels& values) {
  MutexLock lock(&mu_);
  children_.erase(values);
}

class Registry {
 public:
  // A counter or gauge family added again under the same name and label
  // names is the same family (the first help text stays): two components
  // may share one family, each with its own label values. So is a histogram
  // family added again with the same name, label names and bounds (vramd's
  // two HTTP listeners share the request latency series).
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> labels = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                  std::vector<std::string> labels = {});
  // Called at every scrape, after the registered families.
  void AddCollector(std::function<void(TextWriter&)> collector);

  std::string Render() const;

 private:
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<std::vector<double>>> bounds_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_ GUARDED_BY(mu_);
  std::vector<std::function<void(TextWriter&)>> collectors_ GUARDED_BY(mu_);
};

// Latency buckets in seconds, 50 µs .. 10 s.
std::vector<double> LatencyBuckets();

}  // namespace vramd::metrics
