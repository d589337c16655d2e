// The data dir: layout, the one-server lock, ids from the system's random source, atomic writes,
// input images, disk usage and the names recovery looks at.
#include "server/data_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "core/error.h"
#include "io/io_test_util.h"
#include "server/job.h"

namespace fs = std::filesystem;

namespace ltx::server {
namespace {

using ltx::test::expect_error_containing;
using ltx::test::read_bytes;
using ltx::test::TempDir;
using ltx::test::write_bytes;

TEST(DataDir, CreatesItsLayoutAndRecordsThePid) {
  TempDir tmp;
  const std::string root = tmp.file("a/b/data");
  DataDir dir(root);
  EXPECT_EQ(dir.root(), root);
  EXPECT_TRUE(fs::is_directory(dir.outputs_dir()));
  EXPECT_TRUE(fs::is_directory(dir.inputs_dir()));
  EXPECT_EQ(dir.db_path(), root + "/ltx-serve.db");
  EXPECT_EQ(read_bytes(root + "/lock"), std::to_string(::getpid()) + "\n");
  const std::string id = new_job_id();
  EXPECT_EQ(dir.output_path(id), root + "/outputs/" + id + ".mp4");
  EXPECT_EQ(dir.output_path(id, "wav"), root + "/outputs/" + id + ".wav");
  EXPECT_EQ(dir.output_path(id, "png"), dir.thumbnail_path(id));  // an image is its own thumbnail
  EXPECT_THROW(dir.output_path(id, "exr"), Error);
  EXPECT_THROW(dir.output_path(id, "../x"), Error);
  EXPECT_EQ(dir.output_file_path(id, id + ".wav"), root + "/outputs/" + id + ".wav");
  EXPECT_THROW(dir.output_file_path(id, new_job_id() + ".wav"), Error);
  EXPECT_THROW(dir.output_file_path(id, "../" + id + ".wav"), Error);
  EXPECT_EQ(dir.thumbnail_path(id), root + "/outputs/" + id + ".png");
  EXPECT_EQ(dir.input_path(id, "0.png"), root + "/inputs/" + id + "/0.png");
}

TEST(DataDir, AFileInTheWayIsAClearError) {
  TempDir tmp;
  write_bytes(tmp.file("data"), "x");
  expect_error_containing([&] { DataDir d(tmp.file("data")); },
                          {tmp.file("data"), "is a file, not a folder", "--data-dir"});
  fs::create_directories(tmp.file("d2"));
  write_bytes(tmp.file("d2/outputs"), "x");
  expect_error_containing([&] { DataDir d(tmp.file("d2")); },
                          {"outputs folder", tmp.file("d2/outputs"), "is a file"});
  // The failed attempt let go of the lock.
  fs::remove(tmp.file("d2/outputs"));
  DataDir ok(tmp.file("d2"));
}

TEST(DataDir, AnUnwritableFolderIsAClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write into any folder";
  TempDir tmp;
  fs::create_directories(tmp.file("ro"));
  ::chmod(tmp.file("ro").c_str(), 0500);
  expect_error_containing([&] { DataDir d(tmp.file("ro")); },
                          {"no permission", tmp.file("ro"), "--data-dir"});
  expect_error_containing([&] { DataDir d(tmp.file("ro/sub")); },
                          {tmp.file("ro/sub"), "--data-dir"});
  ::chmod(tmp.file("ro").c_str(), 0700);
}

TEST(DataDir, OneServerPerDataDir) {
  TempDir tmp;
  const std::string root = tmp.file("data");
  {
    DataDir first(root);
    expect_error_containing(
        [&] { DataDir second(root); },
        {root, "in use by another ltx serve", "pid " + std::to_string(::getpid()), "--data-dir"});
    // Another process gets the same answer.
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        DataDir second(root);
        ::_exit(1);
      } catch (const Error& e) {
        const std::string msg = e.what();
        ::_exit(msg.find("pid " + std::to_string(::getppid())) != std::string::npos ? 0 : 2);
      } catch (...) {
        ::_exit(3);
      }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child took the lock; 2: its error lacks the pid";
  }
  DataDir again(root);  // released with the first
}

TEST(DataDir, IdsAndTokensAreRandomHex) {
  std::set<std::string> ids, tokens;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = new_job_id(), token = new_token();
    EXPECT_TRUE(is_job_id(id)) << id;
    ASSERT_EQ(token.size(), 64u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    ids.insert(id);
    tokens.insert(token);
  }
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(tokens.size(), 1000u);
}

TEST(DataDir, Sha256MatchesKnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir tmp;
  std::string big(200000, '\0');  // more than one read of the file hasher
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  write_bytes(tmp.file("f"), big);
  EXPECT_EQ(sha256_hex_of_file(tmp.file("f")), sha256_hex(big));
  expect_error_containing([&] { sha256_hex_of_file(tmp.file("missing")); }, {tmp.file("missing")});
}

TEST(DataDir, PathsComeOnlyFromJobIds) {
  TempDir tmp;
  DataDir dir(tmp.file("data"));
  const std::vector<std::string> bad_ids = {"../x",
                                            "video_ZZ",
                                            "",
                                            "video_" + std::string(32, 'A'),
                                            "video_" + std::string(31, 'a') + "/",
                                            "/etc/passwd"};
  for (const std::string& bad : bad_ids) {
    EXPECT_THROW(dir.output_path(bad), Error) << bad;
    EXPECT_THROW(dir.inputs_path(bad), Error) << bad;
    EXPECT_THROW(dir.remove_job_files(bad), Error) << bad;
  }
  const std::string id = new_job_id();
  for (const std::string bad :
       {"../0.png", "0.png/..", "a.png", "0.", "0.PNG", "0.png.tmp", "0000.png"})
    EXPECT_THROW(dir.input_path(id, bad), Error) << bad;
}

TEST(DataDir, WritesFilesAtomically) {
  TempDir tmp;
  write_file_atomic(tmp.file("f"), "one");
  EXPECT_EQ(read_bytes(tmp.file("f")), "one");
  write_bytes(tmp.file("f.tmp"), "leftover");
  write_file_atomic(tmp.file("f"), "two");
  EXPECT_EQ(read_bytes(tmp.file("f")), "two");
  EXPECT_FALSE(fs::exists(tmp.file("f.tmp")));
  expect_error_containing([&] { write_file_atomic(tmp.file("no/such/f"), "x"); },
                          {tmp.file("no/such/f.tmp")});
}

TEST(DataDir, StoresAJobsInputImages) {
  TempDir tmp;
  DataDir dir(tmp.file("data"));
  const std::string id = new_job_id();
  EXPECT_TRUE(dir.store_inputs(id, {}).empty());
  EXPECT_FALSE(fs::exists(dir.inputs_path(id)));
  const auto names = dir.store_inputs(id, {{"png bytes", "png"}, {"jpeg bytes", "jpg"}});
  ASSERT_EQ(names, (std::vector<std::string>{"0.png", "1.jpg"}));
  EXPECT_EQ(read_bytes(dir.input_path(id, "0.png")), "png bytes");
  EXPECT_EQ(read_bytes(dir.input_path(id, "1.jpg")), "jpeg bytes");
  EXPECT_FALSE(fs::exists(dir.inputs_path(id) + ".tmp"));
  // A second store for the same id does not replace the first, and leaves nothing behind.
  EXPECT_THROW(dir.store_inputs(id, {{"other", "png"}}), Error);
  EXPECT_EQ(read_bytes(dir.input_path(id, "0.png")), "png bytes");
  EXPECT_FALSE(fs::exists(dir.inputs_path(id) + ".tmp"));
  // An extension is never a path.
  const std::string id2 = new_job_id();
  for (const std::string bad : {"", "../x", "PNG", "safetensorsxx", "p/g"})
    expect_error_containing([&] { dir.store_inputs(id2, {{"x", bad}}); }, {"extension"});
  EXPECT_FALSE(fs::exists(dir.inputs_path(id2)));
  EXPECT_FALSE(fs::exists(dir.inputs_path(id2) + ".tmp"));
  dir.remove_job_files(id);
  EXPECT_FALSE(fs::exists(dir.inputs_path(id)));
}

TEST(DataDir, ReportsDiskUsageAndListsWhatRecoveryLooksAt) {
  TempDir tmp;
  DataDir dir(tmp.file("data"));
  EXPECT_EQ(dir.disk_usage().total(), 0);
  const std::string a = new_job_id(), b = new_job_id();
  write_bytes(dir.output_path(a), std::string(1000, 'v'));
  write_bytes(dir.thumbnail_path(a), std::string(100, 't'));
  write_bytes(dir.output_path(b) + ".tmp", std::string(10, 'p'));
  dir.store_inputs(b, {{std::string(55, 'i'), "png"}});
  fs::create_directories(dir.inputs_path(a) + ".tmp");
  write_bytes(dir.outputs_dir() + "/notes.txt", "an operator's file");
  const DiskUsage du = dir.disk_usage();
  EXPECT_EQ(du.outputs_bytes, 1000 + 100 + 10 + 18);
  EXPECT_EQ(du.inputs_bytes, 55);
  EXPECT_EQ(du.database_bytes, 0);
  write_bytes(dir.db_path(), std::string(4096, 'd'));
  write_bytes(dir.db_path() + "-wal", std::string(100, 'w'));
  EXPECT_EQ(dir.disk_usage().database_bytes, 4196);
  EXPECT_EQ(dir.disk_usage().total(), du.outputs_bytes + du.inputs_bytes + 4196);
  const DirListing l = dir.listing();
  EXPECT_EQ(l.output_ids, std::vector<std::string>{a});
  EXPECT_EQ(l.input_ids, std::vector<std::string>{b});
  EXPECT_EQ(l.temporaries.size(), 2u);
  EXPECT_EQ(dir.remove_temporaries(), 2);
  EXPECT_FALSE(fs::exists(dir.output_path(b) + ".tmp"));
  EXPECT_FALSE(fs::exists(dir.inputs_path(a) + ".tmp"));
  EXPECT_TRUE(fs::exists(dir.outputs_dir() + "/notes.txt"));
  dir.sync_output(a);
  expect_error_containing([&] { dir.sync_output(b); }, {b, "missing"});
}

}  // namespace
}  // namespace ltx::server
