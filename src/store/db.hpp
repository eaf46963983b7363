#pragma once
// A thin SQL connection seam: the store's logic is written once over this interface, and SQLite (default) or
// PostgreSQL (libpq) executes it. SQL uses `?` placeholders and the portable subset both engines share
// (INSERT ... ON CONFLICT DO NOTHING, TEXT/BIGINT/DOUBLE PRECISION); values are always bound, never spliced.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kindex::store {

using Value = std::variant<std::monostate, int64_t, double, std::string>;

// One result row; typed accessors return the column's value or a default for NULL.
struct Row {
  std::vector<Value> cells;
  bool is_null(size_t i) const { return std::holds_alternative<std::monostate>(cells.at(i)); }
  std::string text(size_t i) const;
  int64_t integer(size_t i) const;
  double real(size_t i) const;
  std::optional<double> maybe_real(size_t i) const;
};
using Rows = std::vector<Row>;

class Db {
 public:
  virtual ~Db() = default;
  // Runs one statement with bound parameters; prepared statements are cached by SQL text.
  virtual Rows query(std::string_view sql, const std::vector<Value>& params = {}) = 0;
  // Runs one statement and returns the number of rows it changed.
  virtual int64_t execute(std::string_view sql, const std::vector<Value>& params = {}) = 0;
  // Runs a parameterless script of several statements (schema creation).
  virtual void script(std::string_view sql) = 0;
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
  virtual std::string backend() const = 0;  // "sqlite" or "postgresql"
  // Changes whenever the stored content may have changed, by this connection or any other; none where the backend
  // cannot tell (nothing is then kept across calls).
  virtual std::optional<std::string> content_version() { return std::nullopt; }

  int open_transactions = 0;  // Transaction nesting depth (inner ones are savepoints)
};

// "sqlite:PATH", a plain path, or ":memory:".
std::unique_ptr<Db> open_sqlite(const std::string& path);
// A libpq connection string ("postgresql://..." or "host=... dbname=..."); throws kindex::Error when the
// build has no PostgreSQL support or the server refuses.
std::unique_ptr<Db> open_postgres(const std::string& conninfo);

// Commits on scope exit unless an exception is in flight (then rolls back). Transactions nest: an inner one is a
// savepoint of the outer, so a whole import can be one transaction around per-run writers that open their own.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  void commit();
  void rollback();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

 private:
  void finish(bool commit);
  Db& db_;
  int depth_;
  bool done_ = false;
};

}  // namespace kindex::store
