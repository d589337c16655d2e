# Fails when a file under src/ other than the environment registry (core/env_settings.*) calls
# getenv: every knob is declared, parsed and validated there once (docs/CONTRIBUTING.md,
# "Adding an environment variable").
# Usage: cmake -DSOURCE_DIR=<repo>/src -P getenv_only_in_registry.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR OR NOT IS_DIRECTORY ${SOURCE_DIR})
  message(FATAL_ERROR "getenv_only_in_registry: pass -DSOURCE_DIR=<repo>/src")
endif()

set(registry core/env_settings.h core/env_settings.cpp)

file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
     ${SOURCE_DIR}/*.h ${SOURCE_DIR}/*.cpp ${SOURCE_DIR}/*.cu ${SOURCE_DIR}/*.cuh)
list(LENGTH sources n_sources)
if(n_sources LESS 10)
  message(FATAL_ERROR "getenv_only_in_registry: only ${n_sources} sources under ${SOURCE_DIR}")
endif()

set(offending)
foreach(file IN LISTS sources)
  if(file IN_LIST registry)
    continue()
  endif()
  file(READ ${SOURCE_DIR}/${file} content)
  if(NOT content MATCHES "getenv")
    continue()
  endif()
  # One list element per line: characters CMake's lists treat specially become harmless ones.
  string(REGEX REPLACE "[][;\\]" "_" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  list(FILTER lines INCLUDE REGEX "getenv")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    list(APPEND offending "src/${file}: ${line}")
  endforeach()
endforeach()

if(offending)
  list(JOIN offending "\n  " shown)
  message(FATAL_ERROR "getenv_only_in_registry: read environment variables through the registry "
                      "(src/core/env_settings.h: a Settings field and a table row), not getenv:\n  ${shown}")
endif()
message(STATUS "getenv_only_in_registry: ${n_sources} sources, getenv only in the registry")
