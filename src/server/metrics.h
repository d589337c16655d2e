#pragma once
// The server's metrics in the Prometheus text exposition format (version 0.0.4), for GET /metrics.
// Counters and histograms are updated from any thread; gauges that describe state held elsewhere
// (queue depth, jobs by status, device memory, disk) are sampled when the page is rendered.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ltx::server {

// Label sets are written in the order given: {{"status", "completed"}} -> {status="completed"}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  Metrics();

  // Monotonic counters.
  void count(const std::string& name, const Labels& labels = {}, double by = 1.0);
  // One observation of a histogram declared with buckets (seconds).
  void observe(const std::string& name, double value, const Labels& labels = {});

  // A gauge's samples, computed when the page is rendered.
  using GaugeSampler = std::function<std::vector<std::pair<Labels, double>>()>;
  void gauge(const std::string& name, const std::string& help, GaugeSampler sampler);

  // The whole page.
  std::string render() const;

  // A counter's current value (0 when never counted); for tests and the start-up summary.
  double counter_value(const std::string& name, const Labels& labels = {}) const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket (not cumulative), plus the +Inf bucket at the end
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    std::string help, type;        // type: counter | histogram | gauge
    std::vector<double> buckets;   // histograms
    std::map<std::string, double> counters;       // by rendered label set
    std::map<std::string, Histogram> histograms;  // by rendered label set
    std::map<std::string, Labels> label_sets;     // rendered -> labels, for histogram lines
    GaugeSampler sampler;
  };

  void declare(const std::string& name, const std::string& type, const std::string& help,
               std::vector<double> buckets = {});
  Family& family(const std::string& name, const char* type);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

// The text of a label set ({a="x",b="y"}, or empty), with values escaped per the format.
std::string render_labels(const Labels& labels);

}  // namespace ltx::server
