// The /metrics page, read back by the Prometheus client library's own parser.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/io_test_util.h"
#include "server/metrics.h"

namespace ltx::server {
namespace {

// The parser's view of `text`: "# name type" lines and "name{labels} value" samples. Fails the
// test when the parser rejects the text.
std::string parsed(const std::string& text) {
  ltx::test::TempDir dir;
  const std::string in = dir.file("metrics.txt");
  {
    std::FILE* f = std::fopen(in.c_str(), "w");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const std::string cmd = std::string("/usr/bin/python3 '") + LTX_TESTS_DIR +
                          "/server/prometheus_parse.py' < '" + in + "' 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_EQ(status, 0) << "the Prometheus parser rejected the page:\n" << out << "\n" << text;
  return out;
}

TEST(Metrics, ThePageParsesWithThePrometheusClient) {
  Metrics m;
  m.count("ltx_jobs_total", {{"outcome", "completed"}});
  m.count("ltx_jobs_total", {{"outcome", "completed"}});
  m.count("ltx_jobs_total", {{"outcome", "failed"}});
  m.count("ltx_jobs_created_total");
  m.observe("ltx_step_duration_seconds", 0.3, {{"stage", "stage 1"}});
  m.observe("ltx_step_duration_seconds", 100.0, {{"stage", "stage 1"}});
  m.observe("ltx_job_duration_seconds", 2.0);
  m.gauge("ltx_queue_depth", "Jobs waiting in the queue.",
          [] { return std::vector<std::pair<Labels, double>>{{{}, 3}}; });
  m.gauge("ltx_jobs", "Jobs in the store, by status.", [] {
    return std::vector<std::pair<Labels, double>>{{{{"status", "queued"}}, 3},
                                                  {{{"status", "say \"hi\"\n"}}, 1}};
  });
  const std::string out = parsed(m.render());
  EXPECT_NE(out.find("# ltx_jobs counter"), std::string::npos) << out;  // the _total family
  EXPECT_NE(out.find("ltx_jobs_total{outcome=\"completed\"} 2.0"), std::string::npos) << out;
  EXPECT_NE(out.find("ltx_jobs_total{outcome=\"failed\"} 1.0"), std::string::npos) << out;
  EXPECT_NE(out.find("# ltx_step_duration_seconds histogram"), std::string::npos) << out;
  EXPECT_NE(out.find("ltx_step_duration_seconds_bucket{le=\"0.5\",stage=\"stage 1\"} 1.0"),
            std::string::npos) << out;
  EXPECT_NE(out.find("ltx_step_duration_seconds_bucket{le=\"+Inf\",stage=\"stage 1\"} 2.0"),
            std::string::npos) << out;
  EXPECT_NE(out.find("ltx_step_duration_seconds_sum{stage=\"stage 1\"} 100.3"), std::string::npos)
      << out;
  EXPECT_NE(out.find("ltx_step_duration_seconds_count{stage=\"stage 1\"} 2.0"), std::string::npos)
      << out;
  EXPECT_NE(out.find("ltx_queue_depth{} 3.0"), std::string::npos) << out;
  // An escaped label value comes back as it was.
  EXPECT_NE(out.find("status=\"say \"hi\"\n\""), std::string::npos) << out;
}

TEST(Metrics, CountersOnlyGrowAndUnknownNamesAreErrors) {
  Metrics m;
  EXPECT_EQ(m.counter_value("ltx_model_loads_total", {{"component", "transformer"}}), 0);
  m.count("ltx_model_loads_total", {{"component", "transformer"}});
  EXPECT_EQ(m.counter_value("ltx_model_loads_total", {{"component", "transformer"}}), 1);
  EXPECT_THROW(m.count("ltx_no_such_total"), Error);
  EXPECT_THROW(m.observe("ltx_jobs_total", 1.0), Error);  // a counter, not a histogram
}

}  // namespace
}  // namespace ltx::server
