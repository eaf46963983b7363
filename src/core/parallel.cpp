#include "core/parallel.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kindex {

int hardware_threads() {
  if (const char* env = std::getenv("KINDEX_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t min_chunk) {
  if (n <= 0) return;
  int64_t threads = std::min<int64_t>(hardware_threads(), (n + min_chunk - 1) / std::max<int64_t>(min_chunk, 1));
  if (threads <= 1) {
    body(0, n);
    return;
  }
  // More chunks than threads so uneven chunks (e.g. long and short sequences) balance out.
  int64_t chunks = std::min<int64_t>(n, threads * 8);
  std::exception_ptr error;
  std::mutex mu;
  int64_t next = 0;
  auto worker = [&] {
    for (;;) {
      int64_t c;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= chunks || error) return;
        c = next++;
      }
      int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
      try {
        body(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kindex
