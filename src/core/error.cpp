#include "core/error.hpp"

namespace kindex {

std::string format_error(const std::string& where, const std::string& field, const std::string& value,
                         const std::string& problem) {
  std::string s;
  if (!where.empty()) s += where + ": ";
  if (!field.empty()) {
    s += field;
    if (!value.empty()) s += " = " + value;
    s += ": ";
  }
  s += problem;
  return s;
}

Error::Error(std::string where, std::string field, std::string value, std::string problem)
    : std::runtime_error(format_error(where, field, value, problem)),
      where_(std::move(where)),
      field_(std::move(field)),
      value_(std::move(value)),
      problem_(std::move(problem)) {}

}  // namespace kindex
