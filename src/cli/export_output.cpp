#include "cli/export_output.h"

#include <chrono>
#include <iostream>
#include <memory>

#include "hub/pull.h"
#include "core/log.h"

namespace ltx::cli {

quantization::ExportProgress export_progress_lines(const std::string& verb) {
  const auto start = std::chrono::steady_clock::now();
  auto next = std::make_shared<int>(5);
  return [=](int64_t done, int64_t total, uint64_t read, uint64_t total_read) {
    const int pct =
        total_read > 0 ? static_cast<int>(100.0 * double(read) / double(total_read)) : 100;
    if (pct < *next && done < total) return;
    while (*next <= pct) *next += 5;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log_info(verb, ": ", pct, " % (", done, " of ", total, " tensors, ",
             hub::human_bytes(static_cast<int64_t>(read)), " of ",
             hub::human_bytes(static_cast<int64_t>(total_read)), " read), ", static_cast<int>(secs),
             " s");
  };
}

void print_export_summary(const quantization::ExportSummary& summary, bool json) {
  if (json)
    std::cout << quantization::to_json(summary).dump(2) << std::endl;
  else
    std::cout << quantization::to_text(summary) << std::flush;
}

}  // namespace ltx::cli
