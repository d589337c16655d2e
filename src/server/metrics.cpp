#include "server/metrics.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ltx::server {

namespace {

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Seconds, from a fast step on a GPU to a long job on a CPU.
const std::vector<double> kStepBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kJobBuckets = {0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};

}  // namespace

std::string render_labels(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  }
  return out + "}";
}

Metrics::Metrics() {
  declare("ltx_jobs_total", "counter", "Jobs that ended, by outcome (completed, failed, cancelled).");
  declare("ltx_jobs_created_total", "counter", "Jobs accepted by POST /v1/videos.");
  declare("ltx_model_loads_total", "counter", "Model loads from files, by component.");
  declare("ltx_model_evictions_total", "counter", "Models evicted from the resident cache.");
  declare("ltx_job_duration_seconds", "histogram", "Wall time of a job from start to output.",
          kJobBuckets);
  declare("ltx_queue_wait_seconds", "histogram", "Time a job waited in the queue.", kJobBuckets);
  declare("ltx_time_to_first_step_seconds", "histogram",
          "Time from a job's start to its first denoising step.", kJobBuckets);
  declare("ltx_step_duration_seconds", "histogram", "Wall time of one denoising step, by stage.",
          kStepBuckets);
  declare("ltx_batch_size", "histogram",
          "Jobs the engine ran together, one observation per run (1: a job alone).",
          {1, 2, 3, 4, 6, 8, 12, 16});
}

void Metrics::declare(const std::string& name, const std::string& type, const std::string& help,
                      std::vector<double> buckets) {
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
}

Metrics::Family& Metrics::family(const std::string& name, const char* type) {
  const auto it = families_.find(name);
  LTX_CHECK(it != families_.end(), "metric ", name, " is not declared");
  LTX_CHECK(it->second.type == type, "metric ", name, " is a ", it->second.type, ", not a ", type);
  return it->second;
}

void Metrics::count(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  family(name, "counter").counters[render_labels(labels)] += by;
}

void Metrics::observe(const std::string& name, double value, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name, "histogram");
  const std::string key = render_labels(labels);
  Histogram& h = f.histograms[key];
  f.label_sets.emplace(key, labels);
  if (h.counts.empty()) h.counts.assign(f.buckets.size() + 1, 0);
  size_t b = 0;
  while (b < f.buckets.size() && value > f.buckets[b]) ++b;
  ++h.counts[b];
  h.sum += value;
  ++h.count;
}

void Metrics::gauge(const std::string& name, const std::string& help, GaugeSampler sampler) {
  std::lock_guard lock(mutex_);
  declare(name, "gauge", help);
  families_[name].sampler = std::move(sampler);
}

double Metrics::counter_value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  const auto f = families_.find(name);
  if (f == families_.end()) return 0;
  const auto c = f->second.counters.find(render_labels(labels));
  return c == f->second.counters.end() ? 0 : c->second;
}

std::string Metrics::render() const {
  // Samplers read other components' state; copy them out so none runs under this lock.
  std::vector<std::pair<std::string, GaugeSampler>> samplers;
  std::string out;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, f] : families_) {
      if (f.type == "gauge") {
        samplers.emplace_back(name, f.sampler);
        continue;
      }
      out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
      if (f.type == "counter") {
        for (const auto& [labels, v] : f.counters) out += name + labels + " " + format_number(v) + "\n";
        continue;
      }
      for (const auto& [key, h] : f.histograms) {
        const Labels& base = f.label_sets.at(key);
        uint64_t cumulative = 0;
        for (size_t b = 0; b <= f.buckets.size(); ++b) {
          cumulative += h.counts[b];
          Labels with_le = base;
          with_le.emplace_back("le", b < f.buckets.size() ? format_number(f.buckets[b]) : "+Inf");
          out += name + "_bucket" + render_labels(with_le) + " " + std::to_string(cumulative) + "\n";
        }
        out += name + "_sum" + key + " " + format_number(h.sum) + "\n";
        out += name + "_count" + key + " " + std::to_string(h.count) + "\n";
      }
    }
  }
  for (const auto& [name, sampler] : samplers) {
    std::string help;
    {
      std::lock_guard lock(mutex_);
      help = families_.at(name).help;
    }
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
    if (sampler)
      for (const auto& [labels, v] : sampler())
        out += name + render_labels(labels) + " " + format_number(v) + "\n";
  }
  return out;
}

}  // namespace ltx::server
