#pragma once
// Starts a throw-away PostgreSQL server for a test: initdb into a temporary directory and pg_ctl start on a
// unix socket in that directory and a free 127.0.0.1 port. As root it runs the server as the `postgres` user
// (PostgreSQL refuses to run as root). The destructor stops it and removes the directory.
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <chrono>

namespace kindex::store::test {

class PostgresServer {
 public:
  PostgresServer() {
    namespace fs = std::filesystem;
    std::string bin;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql")) {
      if (fs::exists(e.path() / "bin/initdb")) bin = (e.path() / "bin").string();
    }
    if (bin.empty()) throw std::runtime_error("PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)");
    dir_ = fs::temp_directory_path() / ("kindex-pg-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    port_ = free_port();
    std::string as_user = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    if (::geteuid() == 0) run("chown postgres " + dir_.string());
    run(as_user + bin + "/initdb -A trust -U postgres --locale=C -E UTF8 -D " + dir_.string() + "/data >" + dir_.string() + "/initdb.log 2>&1");
    run(as_user + bin + "/pg_ctl -D " + dir_.string() + "/data -l " + dir_.string() + "/server.log -w -o \"-k " + dir_.string() +
        " -p " + std::to_string(port_) + " -h 127.0.0.1 -F\" start >/dev/null");
    bin_ = bin;
    as_user_ = as_user;
  }
  ~PostgresServer() {
    if (!bin_.empty()) {
      std::system((as_user_ + bin_ + "/pg_ctl -D " + dir_.string() + "/data -m immediate -w stop >/dev/null 2>&1").c_str());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Stops the server (fast: every connection is cut), keeps it down `down_s` seconds, and starts it again.
  void restart(double down_s) const {
    run(as_user_ + bin_ + "/pg_ctl -D " + dir_.string() + "/data -m fast -w stop >/dev/null");
    std::this_thread::sleep_for(std::chrono::duration<double>(down_s));
    run(as_user_ + bin_ + "/pg_ctl -D " + dir_.string() + "/data -l " + dir_.string() + "/server.log -w -o \"-k " +
        dir_.string() + " -p " + std::to_string(port_) + " -h 127.0.0.1 -F\" start >/dev/null");
  }
  std::string uri() const { return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres"; }
  // A fresh database per test, so each starts empty.
  std::string create_database(const std::string& name) const {
    run(as_user_ + bin_ + "/../bin/psql -q -h 127.0.0.1 -p " + std::to_string(port_) + " -U postgres -c 'CREATE DATABASE " + name + "' postgres >/dev/null");
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }

 private:
  static int free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    int port = ntohs(a.sin_port);
    ::close(s);
    return port;
  }
  static void run(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  std::filesystem::path dir_;
  int port_ = 0;
  std::string bin_, as_user_;
};

}  // namespace kindex::store::test
