// PostgreSQL backend (libpq): the same SQL as SQLite, `?` placeholders rewritten to $1..$n, each statement
// prepared once per connection, every value sent as a bound text parameter.
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "store/db.hpp"

#ifdef KINDEX_HAVE_POSTGRES
#include <libpq-fe.h>

#include <cstdio>
#endif

namespace kindex::store {

#ifdef KINDEX_HAVE_POSTGRES
namespace {

// Rewrites `?` outside quoted literals into $1, $2, ...
std::string to_dollar_params(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  bool quoted = false;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += '$' + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

class PostgresDb final : public Db {
 public:
  explicit PostgresDb(const std::string& conninfo) : where_(redact(conninfo)) {
    conn_ = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(conn_);
      PQfinish(conn_);
      conn_ = nullptr;
      throw Error(where_, "store", where_, "cannot connect to PostgreSQL: " + msg);
    }
    script("SET client_min_messages = warning");
  }
  ~PostgresDb() override {
    if (conn_) PQfinish(conn_);
  }

  Rows query(std::string_view sql, const std::vector<Value>& params) override {
    std::lock_guard lock(mutex_);
    PGresult* res = run(sql, params);
    Rows rows;
    int nrows = PQntuples(res), ncols = PQnfields(res);
    rows.reserve(nrows);
    for (int r = 0; r < nrows; ++r) {
      Row row;
      row.cells.reserve(ncols);
      for (int c = 0; c < ncols; ++c) {
        if (PQgetisnull(res, r, c)) {
          row.cells.emplace_back(std::monostate{});
          continue;
        }
        const char* v = PQgetvalue(res, r, c);
        switch (PQftype(res, c)) {
          case 20: case 21: case 23: row.cells.emplace_back(static_cast<int64_t>(std::stoll(v))); break;
          case 16: row.cells.emplace_back(static_cast<int64_t>(v[0] == 't' ? 1 : 0)); break;
          case 700: case 701: case 1700: row.cells.emplace_back(std::stod(v)); break;
          default: row.cells.emplace_back(std::string(v, PQgetlength(res, r, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    PQclear(res);
    return rows;
  }

  int64_t execute(std::string_view sql, const std::vector<Value>& params) override {
    std::lock_guard lock(mutex_);
    PGresult* res = run(sql, params);
    const char* n = PQcmdTuples(res);
    int64_t changed = (n && *n) ? std::stoll(n) : 0;
    PQclear(res);
    return changed;
  }

  void script(std::string_view sql) override {
    std::lock_guard lock(mutex_);
    PGresult* res = PQexec(conn_, std::string(sql).c_str());
    check(res, sql);
    PQclear(res);
  }

  void begin() override { script("BEGIN"); }
  void commit() override { script("COMMIT"); }
  void rollback() override { script("ROLLBACK"); }
  std::string backend() const override { return "postgresql"; }

 private:
  static std::string redact(const std::string& conninfo) {
    auto at = conninfo.find('@');
    auto scheme = conninfo.find("://");
    if (at == std::string::npos || scheme == std::string::npos) return conninfo;
    return conninfo.substr(0, scheme + 3) + "***" + conninfo.substr(at);
  }

  PGresult* run(std::string_view sql, const std::vector<Value>& params) {
    std::string key(sql);
    auto it = prepared_.find(key);
    if (it == prepared_.end()) {
      std::string name = "kx" + std::to_string(prepared_.size());
      PGresult* res = PQprepare(conn_, name.c_str(), to_dollar_params(sql).c_str(), 0, nullptr);
      check(res, sql);
      PQclear(res);
      it = prepared_.emplace(key, name).first;
    }
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      const Value& v = params[i];
      if (auto n = std::get_if<int64_t>(&v)) {
        text[i] = std::to_string(*n);
      } else if (auto d = std::get_if<double>(&v)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", *d);
        text[i] = buf;
      } else if (auto s = std::get_if<std::string>(&v)) {
        text[i] = *s;
      } else {
        continue;  // NULL
      }
      values[i] = text[i].c_str();
    }
    PGresult* res = PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(params.size()), values.data(),
                                   nullptr, nullptr, 0);
    check(res, sql);
    return res;
  }

  void check(PGresult* res, std::string_view sql) {
    auto status = PQresultStatus(res);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
    std::string msg = PQresultErrorMessage(res);
    PQclear(res);
    throw Error(where_, "sql", std::string(sql.substr(0, 120)), msg);
  }

  std::string where_;
  PGconn* conn_ = nullptr;
  std::map<std::string, std::string, std::less<>> prepared_;
  std::recursive_mutex mutex_;
};

}  // namespace

std::unique_ptr<Db> open_postgres(const std::string& conninfo) { return std::make_unique<PostgresDb>(conninfo); }

#else

std::unique_ptr<Db> open_postgres(const std::string& conninfo) {
  throw Error("store", "uri", conninfo, "this kindex was built without PostgreSQL support (KINDEX_POSTGRES=OFF)");
}

#endif

}  // namespace kindex::store
