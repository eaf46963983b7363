#pragma once
// A test suite sharing one throw-away PostgreSQL server (postgres_server.hpp), started before its first test and
// stopped after its last; database(name) gives a test a fresh, empty database. Without PostgreSQL support
// (KINDEX_POSTGRES=OFF) its tests skip.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/postgres_server.hpp"

namespace kindex::store::test {

class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifdef KINDEX_HAVE_POSTGRES
    server() = std::make_unique<PostgresServer>();
#endif
  }
  static void TearDownTestSuite() { server().reset(); }
  void SetUp() override {
#ifndef KINDEX_HAVE_POSTGRES
    GTEST_SKIP() << "built without PostgreSQL support (KINDEX_POSTGRES=OFF)";
#endif
  }
  // A postgresql:// URI of a new database called `name` on the suite's server.
  static std::string database(const std::string& name) { return server()->create_database(name); }
  // Restarts the suite's server, down for `down_s` seconds (every connection to it is cut).
  static void restart_server(double down_s) { server()->restart(down_s); }

 private:
  static std::unique_ptr<PostgresServer>& server() {
    static std::unique_ptr<PostgresServer> s;
    return s;
  }
};

}  // namespace kindex::store::test
