# Fails when the engine library (libltx) defines or references anything of the tools, the server or
# the CLI: the benchmark harness (ltx::bench), the parity drivers (ltx::parity), op profiling and the
# GPU monitor (ltx::profiling), the server (ltx::server, cpp-httplib's httplib::, SQLite's sqlite3_),
# the command code (ltx::cli) or its argument parser (CLI11's CLI::).
# An application linking the engine gets none of them (docs/ARCHITECTURE.md, "Products").
# Usage: cmake -DNM=<nm> -DLIBRARY=<libltx.a> -DLISTING=<scratch file> -P engine_library_symbols.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var NM LIBRARY LISTING)
  if(NOT ${var})
    message(FATAL_ERROR "engine_library_symbols: pass -D${var}=...")
  endif()
endforeach()

execute_process(COMMAND ${NM} -C ${LIBRARY} OUTPUT_FILE ${LISTING} RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "engine_library_symbols: `${NM} -C ${LIBRARY}` failed (${rc}): ${err}")
endif()

# The listing must be the engine's: a check over an empty listing could not fail.
file(STRINGS ${LISTING} engine_symbols REGEX "ltx::Tensor::" LIMIT_COUNT 1)
if(NOT engine_symbols)
  message(FATAL_ERROR "engine_library_symbols: no ltx::Tensor symbol in `${NM} -C ${LIBRARY}`; "
                      "is ${LIBRARY} the engine library?")
endif()

# The tools', the server's and the CLI's namespaces, CLI11's, cpp-httplib's, SQLite's, and the
# profiler's and monitor's type names (should they come back into the engine under another namespace).
set(tool_symbols "ltx::(bench|parity|profiling|server|cli)::|CLI::|httplib::|sqlite3_|OpProfile|GpuMonitor")
file(STRINGS ${LISTING} offending REGEX "${tool_symbols}")
if(offending)
  list(REMOVE_DUPLICATES offending)
  list(LENGTH offending n)
  list(SUBLIST offending 0 40 shown)
  list(JOIN shown "\n  " shown)
  message(FATAL_ERROR "engine_library_symbols: ${LIBRARY} has ${n} symbols of the tools or the CLI "
                      "(move the code into ltx_tools / the CLI, or break the dependency):\n  ${shown}")
endif()
message(STATUS "engine_library_symbols: ${LIBRARY} holds no tool or CLI symbols")
