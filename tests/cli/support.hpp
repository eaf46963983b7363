#pragma once
// Running the built `kindex` from a test: a command's exit code and output, in a fresh working directory.
#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "support/paths.hpp"

namespace kindex::test {

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string kindex_binary() { return kindex::test::binary_dir() + "/bin/kindex"; }

// A shell command's exit code and standard output.
inline Outcome run_shell(const std::string& cmd) {
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.output.append(buf.data(), n);
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// A fresh empty working directory, removed afterwards.
struct WorkDir {
  std::filesystem::path path;
  WorkDir() {
    path = std::filesystem::temp_directory_path() / ("kindex-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~WorkDir() { std::filesystem::remove_all(path); }
  static int& counter() {
    static int n = 0;  // per process
    return n;
  }
  // `kindex ARGS` run in this directory (stdout and stderr together unless stdout_only), KINDEX_STORE unset
  // unless `env` sets it.
  Outcome run(const std::string& args, const std::string& env = "", bool stdout_only = false) const {
    return run_shell("cd '" + path.string() + "' && env -u KINDEX_STORE " + env + " " + kindex_binary() + " " + args +
                     (stdout_only ? " 2>/dev/null" : " 2>&1"));
  }
};

}  // namespace kindex::test
