#include "vramd/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "vramd/parse.h"

namespace vramd::metrics {
namespace {

void AtomicAdd(std::atomic<double>& a, double by) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

std::vector<std::pair<std::string, std::string>> Zip(const std::vector<std::string>& names, const Labels& values) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) out.emplace_back(names[i], values[i]);
  return out;
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  if (ParseDouble(buf) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string EscapeLabel(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void TextWriter::Header(const std::string& name, const std::string& help, const char* type) {
  *out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void TextWriter::Sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                        double value) {
  std::string& o = *out_;
  o += name;
  if (!labels.empty()) {
    o += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) o += ',';
      o += labels[i].first;
      o += "=\"";
      o += EscapeLabel(labels[i].second);
      o += '"';
    }
    o += '}';
  }
  o += ' ';
  o += FormatValue(value);
  o += '\n';
}

void Counter::Inc(double by) { AtomicAdd(value_, by); }
void Gauge::Add(double by) { AtomicAdd(value_, by); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_->size() && v > (*bounds_)[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::Read(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const {
  cumulative->assign(bounds_->size() + 1, 0);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    acc += buckets_[i].load(std::memory_order_relaxed);
    (*cumulative)[i] = acc;
  }
  *sum = sum_.load(std::memory_order_relaxed);
  *count = acc;  // consistent with the buckets even under concurrent observes
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  for (const auto& f : counters_) {
    if (f->name() == name && f->label_names() == labels) return *f;
  }
  counters_.push_back(std::make_unique<Family<Counter>>(name, help, std::move(labels),
                                                        [] { return std::make_unique<Counter>(); }));
  return *counters_.back();
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  for (const auto& f : gauges_) {
    if (f->name() == name && f->label_names() == labels) return *f;
  }
  gauges_.push_back(
      std::make_unique<Family<Gauge>>(name, help, std::move(labels), [] { return std::make_unique<Gauge>(); }));
  return *gauges_.back();
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<double> bounds, std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < histograms_.size(); ++i) {  // bounds_[i] are histograms_[i]'s
    const Family<Histogram>& f = *histograms_[i];
    if (f.name() == name && f.label_names() == labels && *bounds_[i] == bounds) return *histograms_[i];
  }
  bounds_.push_back(std::make_unique<std::vector<double>>(std::move(bounds)));
  const std::vector<double>* b = bounds_.back().get();
  histograms_.push_back(std::make_unique<Family<Histogram>>(name, help, std::move(labels),
                                                            [b] { return std::make_unique<Histogram>(b); }));
  return *histograms_.back();
}

void Registry::AddCollector(std::function<void(TextWriter&)> collector) {
  MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  std::string out;
  out.reserve(16 << 10);
  TextWriter w(&out);
  std::vector<std::function<void(TextWriter&)>> collectors;
  {
    MutexLock lock(&mu_);
    for (const auto& f : counters_) {
      w.Header(f->name(), f->help(), "counter");
      f->ForEach([&](const Labels& l, const Counter& c) { w.Sample(f->name(), Zip(f->label_names(), l), c.Value()); });
    }
    for (const auto& f : gauges_) {
      w.Header(f->name(), f->help(), "gauge");
      f->ForEach([&](const Labels& l, const Gauge& g) { w.Sample(f->name(), Zip(f->label_names(), l), g.Value()); });
    }
    for (const auto& f : histograms_) {
      w.Header(f->name(), f->help(), "histogram");
      // Bounds live in the histogram; rebuild "le" labels from its family bounds.
      const std::vector<double>& bounds = *bounds_[&f - &histograms_[0]];
      f->ForEach([&](const Labels& l, const Histogram& h) {
        std::vector<uint64_t> cum;
        double sum;
        uint64_t count;
        h.Read(&cum, &sum, &count);
        auto base = Zip(f->label_names(), l);
        for (size_t i = 0; i < cum.size(); ++i) {
          auto lb = base;
          lb.emplace_back("le", i < bounds.size() ? FormatValue(bounds[i]) : "+Inf");
          w.Sample(f->name() + "_bucket", lb, static_cast<double>(cum[i]));
        }
        w.Sample(f->name() + "_sum", base, sum);
        w.Sample(f->name() + "_count", base, static_cast<double>(count));
      });
    }
    collectors = collectors_;
  }
  for (const auto& c : collectors) c(w);
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace vramd::metrics
