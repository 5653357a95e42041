// Test support: FIFOs and directories where a reader expects a regular file. A reader must
// refuse them with a sentence naming the path; before it did, a FIFO blocked it for ever.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"
#include "support/temp_dir.h"

namespace trident::test_support {

// A fresh directory holding a FIFO named `fifo_name` and a directory named `dir_name`.
struct SpecialFiles {
  std::filesystem::path dir, fifo, directory;
  SpecialFiles(const std::string& tag, const std::string& fifo_name, const std::string& dir_name) {
    dir = fresh_temp_dir("special_" + tag);
    fifo = dir / fifo_name;
    directory = dir / dir_name;
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::filesystem::create_directory(directory);
  }
  ~SpecialFiles() { std::filesystem::remove_all(dir); }
};

// `read(path)` must throw trident::Error naming `path` and containing `word`.
inline void expect_refused_file(const std::function<void(const std::string&)>& read,
                                const std::filesystem::path& path, const std::string& word) {
  try {
    read(path.string());
    ADD_FAILURE() << path << " was read";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  }
}

// Both special files refused, each for what it is.
inline void expect_special_files_refused(const std::function<void(const std::string&)>& read, const SpecialFiles& f) {
  expect_refused_file(read, f.fifo, "FIFO");
  expect_refused_file(read, f.directory, "directory");
}

}  // namespace trident::test_support
