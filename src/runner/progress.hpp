#pragma once
// The progress bar on stderr (--progress): runs done of the total and what runs now.
#include <cstddef>
#include <string>

namespace kindex::runner {

class Progress {
 public:
  Progress(bool enabled, size_t total) : enabled_(enabled), total_(total) {}
  void update(size_t done, const std::string& what);
  void finish();

 private:
  bool enabled_;
  size_t total_;
};

}  // namespace kindex::runner
