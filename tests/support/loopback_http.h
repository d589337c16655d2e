#pragma once
// Test servers on cpp-httplib: the library ignores stop() until its listen loop runs, so a test
// that starts a server on a thread waits for the loop before it can end (and stop it).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

namespace ltx::test {

inline void wait_until_listening(const httplib::Server& server) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!server.is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_TRUE(server.is_running()) << "the test server's listen loop did not start";
}

}  // namespace ltx::test
