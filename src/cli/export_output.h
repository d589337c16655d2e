#pragma once
// What `ltx quantize` and `ltx convert` print: progress lines on stderr, the summary on stdout.
#include <string>

#include "quantization/checkpoint_export.h"

namespace ltx::cli {

// Logs "<verb>: 35 % (1465 of 4186 tensors, 15 GB of 43 GB read), 42 s" each time another 5 % of
// the input has been read, and at the end.
quantization::ExportProgress export_progress_lines(const std::string& verb);
// The summary as text, or as one JSON object.
void print_export_summary(const quantization::ExportSummary& summary, bool json);

}  // namespace ltx::cli
