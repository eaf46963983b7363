#include "store/db.hpp"

#include <exception>

#include "core/error.hpp"

namespace kindex::store {

std::string Row::text(size_t i) const {
  const Value& v = cells.at(i);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto d = std::get_if<double>(&v)) return std::to_string(*d);
  return {};
}

int64_t Row::integer(size_t i) const {
  const Value& v = cells.at(i);
  if (auto n = std::get_if<int64_t>(&v)) return *n;
  if (auto d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (auto s = std::get_if<std::string>(&v)) return s->empty() ? 0 : std::stoll(*s);
  return 0;
}

double Row::real(size_t i) const { return maybe_real(i).value_or(0.0); }

std::optional<double> Row::maybe_real(size_t i) const {
  const Value& v = cells.at(i);
  if (auto d = std::get_if<double>(&v)) return *d;
  if (auto n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  if (auto s = std::get_if<std::string>(&v)) return s->empty() ? std::nullopt : std::optional<double>(std::stod(*s));
  return std::nullopt;
}

Transaction::Transaction(Db& db) : db_(db), depth_(db.open_transactions) {
  if (depth_ == 0) {
    db_.begin();
  } else {
    db_.execute("SAVEPOINT kindex_" + std::to_string(depth_));
  }
  ++db_.open_transactions;
}

void Transaction::finish(bool commit) {
  done_ = true;
  --db_.open_transactions;
  if (depth_ == 0) {
    commit ? db_.commit() : db_.rollback();
  } else {
    const std::string name = "kindex_" + std::to_string(depth_);
    if (!commit) db_.execute("ROLLBACK TO SAVEPOINT " + name);
    db_.execute("RELEASE SAVEPOINT " + name);
  }
}

Transaction::~Transaction() {
  if (done_) return;
  try {
    finish(std::uncaught_exceptions() == 0);
  } catch (...) {
  }
}

void Transaction::commit() { finish(true); }
void Transaction::rollback() { finish(false); }

}  // namespace kindex::store
