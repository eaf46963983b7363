#include "runner/progress.hpp"

#include <iostream>

namespace kindex::runner {

void Progress::update(size_t done, const std::string& what) {
  if (!enabled_) return;
  const int width = 30;
  int filled = total_ ? int(double(done) / double(total_) * width) : width;
  std::string label = what.size() > 110 ? what.substr(0, 107) + "..." : what;
  std::cerr << "\r[" << std::string(size_t(filled), '#') << std::string(size_t(width - filled), '.') << "] " << done
            << "/" << total_ << " " << label << "\033[K" << std::flush;
}

void Progress::finish() {
  if (enabled_) std::cerr << "\r\033[K" << std::flush;
}

}  // namespace kindex::runner
