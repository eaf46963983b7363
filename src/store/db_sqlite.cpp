// SQLite backend: WAL (readers never block the writer), foreign keys on, a busy timeout so concurrent writers
// wait instead of failing, and one cached prepared statement per SQL text.
#include <sqlite3.h>

#include <unordered_map>
#include <mutex>

#include "core/error.hpp"
#include "store/db.hpp"

namespace kindex::store {
namespace {

class SqliteDb final : public Db {
 public:
  explicit SqliteDb(const std::string& path) : path_(path) {
    // Every use of the connection holds mutex_, so SQLite's own mutex (taken again on every call, every column
    // read included) is left out.
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      if (db_) sqlite3_close(db_);
      db_ = nullptr;
      throw Error(path, "store", "sqlite:" + path, "cannot open SQLite database: " + msg);
    }
    sqlite3_busy_timeout(db_, 30000);
    // A page cache and memory map large enough for an index of a few hundred thousand runs: queries that read a
    // cohort's rows hit memory instead of one pread per row.
    script("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-131072; PRAGMA mmap_size=1073741824;"
           " PRAGMA temp_store=MEMORY;");
    if (path != ":memory:") script("PRAGMA journal_mode=WAL;");
  }
  ~SqliteDb() override {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    if (db_) sqlite3_close(db_);
  }

  Rows query(std::string_view sql, const std::vector<Value>& params) override {
    std::lock_guard lock(mutex_);
    sqlite3_stmt* stmt = prepare(sql, params);
    Rows rows;
    while (true) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail(stmt, sql, rc);
      Row row;
      int n = sqlite3_column_count(stmt);
      row.cells.reserve(n);
      for (int i = 0; i < n; ++i) {
        switch (sqlite3_column_type(stmt, i)) {
          case SQLITE_INTEGER: row.cells.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, i))); break;
          case SQLITE_FLOAT: row.cells.emplace_back(sqlite3_column_double(stmt, i)); break;
          case SQLITE_NULL: row.cells.emplace_back(std::monostate{}); break;
          default: {
            auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
            row.cells.emplace_back(std::string(p ? p : "", sqlite3_column_bytes(stmt, i)));
          }
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(stmt);
    return rows;
  }

  int64_t execute(std::string_view sql, const std::vector<Value>& params) override {
    std::lock_guard lock(mutex_);
    sqlite3_stmt* stmt = prepare(sql, params);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) fail(stmt, sql, rc);
    sqlite3_reset(stmt);
    return sqlite3_changes(db_);
  }

  void script(std::string_view sql) override {
    std::lock_guard lock(mutex_);
    char* err = nullptr;
    if (int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err); rc != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      if (busy(rc)) throw_busy();
      throw Error(path_, "sql", std::string(sql.substr(0, 80)), msg);
    }
  }

  void begin() override { script("BEGIN IMMEDIATE"); }
  void commit() override { script("COMMIT"); }
  void rollback() override { script("ROLLBACK"); }
  std::string backend() const override { return "sqlite"; }
  // data_version moves with other connections' commits, total_changes with this connection's writes.
  std::optional<std::string> content_version() override {
    std::lock_guard lock(mutex_);
    sqlite3_stmt* stmt = prepare("PRAGMA data_version", {});
    int64_t data_version = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
    sqlite3_reset(stmt);
    return std::to_string(data_version) + ":" + std::to_string(sqlite3_total_changes64(db_));
  }

 private:
  sqlite3_stmt* prepare(std::string_view sql, const std::vector<Value>& params) {
    std::string key(sql);
    auto it = cache_.find(key);
    sqlite3_stmt* stmt = nullptr;
    if (it == cache_.end()) {
      if (sqlite3_prepare_v3(db_, key.c_str(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                             nullptr) != SQLITE_OK) {
        throw Error(path_, "sql", key.substr(0, 120), sqlite3_errmsg(db_));
      }
      cache_.emplace(key, stmt);
    } else {
      stmt = it->second;
    }
    sqlite3_clear_bindings(stmt);
    if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(stmt)) {
      throw Error(path_, "sql", key.substr(0, 120), "parameter count mismatch");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i) + 1;
      const Value& v = params[i];
      if (auto n = std::get_if<int64_t>(&v)) {
        sqlite3_bind_int64(stmt, idx, *n);
      } else if (auto d = std::get_if<double>(&v)) {
        sqlite3_bind_double(stmt, idx, *d);
      } else if (auto s = std::get_if<std::string>(&v)) {
        sqlite3_bind_text(stmt, idx, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(stmt, idx);
      }
    }
    return stmt;
  }

  [[noreturn]] void fail(sqlite3_stmt* stmt, std::string_view sql, int rc) {
    std::string msg = sqlite3_errmsg(db_);
    sqlite3_reset(stmt);
    if (busy(rc)) throw_busy();
    throw Error(path_, "sql", std::string(sql.substr(0, 120)), msg);
  }

  // The busy timeout ran out while another connection held the write lock (a concurrent import, typically).
  static bool busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }
  [[noreturn]] void throw_busy() {
    throw Error(path_, "store", "sqlite:" + path_,
                "store busy: another process is writing to it (an import in progress?); retry when it finishes");
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  // Hashed: many statements share a long prefix (the run columns), which made ordered lookups compare hundreds of
  // bytes per step.
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
  std::recursive_mutex mutex_;
};

}  // namespace

std::unique_ptr<Db> open_sqlite(const std::string& path) { return std::make_unique<SqliteDb>(path); }

}  // namespace kindex::store
