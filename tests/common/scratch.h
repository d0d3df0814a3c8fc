// A folder that belongs to this test process alone, for tests that write files under fixed
// names. ctest runs every test in a process of its own, several at once, and other checkouts
// may be testing on the same machine: a fixed name directly under /tmp would be shared by all
// of them. Created on first use under the temp dir, removed with its contents at exit.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace brisk::testing {

inline const std::string& scratch() {
  struct Folder {
    std::string path;
    Folder() {
      std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "brisk_test_XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) throw std::runtime_error("scratch: mkdtemp failed for " + tmpl);
      path = tmpl;
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

}  // namespace brisk::testing
