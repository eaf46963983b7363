#pragma once
// One error type for bad input anywhere in kindex: it names where (a file or source), the field and the value,
// so a user can fix the input without reading code.
#include <stdexcept>
#include <string>

namespace kindex {

class Error : public std::runtime_error {
 public:
  Error(std::string where, std::string field, std::string value, std::string problem);
  const std::string& where() const { return where_; }
  const std::string& field() const { return field_; }
  const std::string& value() const { return value_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string where_, field_, value_, problem_;
};

// Formats as "<where>: <field> = <value>: <problem>" (parts left empty are omitted).
std::string format_error(const std::string& where, const std::string& field, const std::string& value,
                         const std::string& problem);

}  // namespace kindex
