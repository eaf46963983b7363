#pragma once
// Shared helpers for the catalog tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/error.hpp"

namespace kindex::test {

// Runs f, which must throw kindex::Error; returns it (or a blank one after recording a failure).
template <class F>
kindex::Error catch_error(F&& f) {
  try {
    f();
  } catch (const kindex::Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected kindex::Error, got std::exception: " << e.what();
    return kindex::Error("", "", "", "");
  }
  ADD_FAILURE() << "expected kindex::Error, nothing was thrown";
  return kindex::Error("", "", "", "");
}

// Expects f to throw a kindex::Error whose where / field / value contain the given parts.
#define EXPECT_KINDEX_ERROR(stmt, where_part, field_part, value_part)                    \
  do {                                                                                   \
    kindex::Error e_ = kindex::test::catch_error([&] { stmt; });                         \
    EXPECT_NE(e_.where().find(where_part), std::string::npos) << "where: " << e_.what(); \
    EXPECT_NE(e_.field().find(field_part), std::string::npos) << "field: " << e_.what(); \
    EXPECT_NE(e_.value().find(value_part), std::string::npos) << "value: " << e_.what(); \
  } while (0)

// A fresh temporary directory, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("kindex-catalog-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& rel, const std::string& content) const {
    auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace kindex::test
