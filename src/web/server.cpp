#include "web/server.hpp"

#include <httplib.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "web/pages.hpp"

namespace kindex::web {

using nlohmann::json;

// A fixed window per client address: simple and enough to stop one client from starving the rest.
struct IndexServer::RateLimiter {
  std::mutex mutex;
  std::map<std::string, std::pair<int64_t, int>> windows;  // address -> (minute, count)
  bool allow(const std::string& address, int per_minute) {
    int64_t minute = std::chrono::duration_cast<std::chrono::minutes>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
    std::lock_guard lock(mutex);
    if (windows.size() > 100000) windows.clear();
    auto& [m, count] = windows[address];
    if (m != minute) {
      m = minute;
      count = 0;
    }
    return ++count <= per_minute;
  }
};

IndexServer::IndexServer(store::Store& store, ServerOptions options)
    : store_(store), options_(std::move(options)), http_(std::make_unique<httplib::Server>()),
      limiter_(std::make_unique<RateLimiter>()) {
  routes();
}

IndexServer::~IndexServer() { stop(); }

int IndexServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host.c_str());
  } else {
    port_ = http_->bind_to_port(options_.host.c_str(), options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) throw Error("serve", "address", options_.host + ":" + std::to_string(options_.port), "cannot bind");
  return port_;
}

void IndexServer::listen() { http_->listen_after_bind(); }
void IndexServer::stop() {
  if (http_) http_->stop();
}

namespace {

// Route parameters are ids, digests, slugs or names: bounded and printable, never paths.
std::string param(const httplib::Request& req, const std::string& name, size_t index = 1) {
  std::string v = index < req.matches.size() ? std::string(req.matches[index]) : req.get_param_value(name);
  if (v.size() > 300) throw Error("request", name, v.substr(0, 40) + "...", "too long");
  return v;
}

int status_for(const Error& e) { return e.problem().rfind("no such", 0) == 0 || e.problem().rfind("not a workload", 0) == 0 ? 404 : 400; }

void send_json(httplib::Response& res, const json& body) {
  res.set_content(body.dump(), "application/json; charset=utf-8");
}

void send_html(httplib::Response& res, const std::string& body) { res.set_content(body, "text/html; charset=utf-8"); }

store::ResolveQuery resolve_query(const httplib::Request& req) {
  store::ResolveQuery q;
  q.operation = param(req, "operation");
  q.dtype = param(req, "dtype");
  q.gpu = param(req, "gpu");
  // axes=batch_size=1,num_pages=425 and/or individual axis parameters.
  std::string axes = param(req, "axes");
  size_t start = 0;
  while (start < axes.size()) {
    size_t comma = axes.find(',', start);
    std::string pair = axes.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto eq = pair.find('=');
    if (eq == std::string::npos) throw Error("request", "axes", pair, "expected name=value");
    try {
      q.axes[pair.substr(0, eq)] = std::stoll(pair.substr(eq + 1));
    } catch (const std::exception&) {
      throw Error("request", "axes", pair, "the value must be an integer");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // Axis values may also come as their own parameters (?batch_size=1&num_pages=425).
  for (const auto& [key, value] : req.params) {
    if (key == "operation" || key == "dtype" || key == "gpu" || key == "axes") continue;
    if (key.size() > 100 || value.empty() || value.find_first_not_of("-0123456789") != std::string::npos) {
      throw Error("request", key, value.substr(0, 40), "unknown parameter (axis values must be integers)");
    }
    try {
      q.axes[key] = std::stoll(value);
    } catch (const std::exception&) {
      throw Error("request", key, value.substr(0, 40), "not an integer");
    }
  }
  return q;
}

}  // namespace

void IndexServer::routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.new_task_queue = [n = options_.threads] { return new httplib::ThreadPool(n); };
  s.set_read_timeout(10, 0);
  s.set_write_timeout(10, 0);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!limiter_->allow(req.remote_addr, options_.requests_per_minute)) {
      res.status = 429;
      send_json(res, {{"error", "rate limit exceeded"}});
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    int status = 500;
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const Error& e) {
      status = status_for(e);
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    }
    res.status = status;
    if (req.path.rfind("/api/", 0) == 0) {
      send_json(res, {{"error", message}});
    } else {
      send_html(res, error_page(status, message));
    }
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413 ? "request too large" : res.status == 404 ? "not found" : "error";
    if (req.path.rfind("/api/", 0) == 0) {
      send_json(res, {{"error", message}});
    } else {
      send_html(res, error_page(res.status, message));
    }
  });

  // JSON API: the same objects the CLI prints with --json.
  s.Get("/api/search", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::search(store_, param(req, "q")));
  });
  s.Get(R"(/api/operations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::operation_view(store_, param(req, "operation"), param(req, "workload", 99)));
  });
  s.Get(R"(/api/workloads/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::workload_view(store_, param(req, "workload")));
  });
  s.Get(R"(/api/implementations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::implementation_view(store_, param(req, "implementation")));
  });
  s.Get(R"(/api/runs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::run_view(store_, param(req, "run")));
  });
  s.Get("/api/resolve", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::resolve(store_, resolve_query(req)));
  });
  s.Get("/api/records", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::records(store_, param(req, "operation")));
  });
  s.Get("/api/compare", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, store::compare(store_, param(req, "a"), param(req, "b")));
  });
  s.Post("/api/import", [this](const httplib::Request& req, httplib::Response& res) {
    if (options_.token.empty()) {
      res.status = 403;
      return send_json(res, {{"error", "this server is read-only (start it with --token to allow imports)"}});
    }
    std::string auth = req.get_header_value("Authorization");
    std::string expected = "Bearer " + options_.token;
    if (auth.size() != expected.size() || CRYPTO_memcmp(auth.data(), expected.data(), auth.size()) != 0) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      return send_json(res, {{"error", "missing or wrong bearer token"}});
    }
    // The body goes to a server-chosen temporary file; its format is detected from content, never a path.
    bool zstd = req.body.size() >= 4 && static_cast<unsigned char>(req.body[0]) == 0x28 &&
                static_cast<unsigned char>(req.body[1]) == 0xb5 && static_cast<unsigned char>(req.body[2]) == 0x2f &&
                static_cast<unsigned char>(req.body[3]) == 0xfd;
    size_t first = req.body.find_first_not_of(" \t\r\n");
    bool json_body = first != std::string::npos && req.body[first] == '{';
    bool one_document = json_body && req.body.find("\n{", first) == std::string::npos &&
                        req.body.find("\"apiVersion\"") != std::string::npos;
    std::string ext = zstd ? ".jsonl.zst" : one_document ? ".json" : json_body ? ".jsonl" : ".yaml";
    auto path = std::filesystem::temp_directory_path() /
                ("kindex-upload-" + std::to_string(::getpid()) + "-" +
                 evidence::sha256_hex(req.body + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())).substr(0, 16) + ext);
    {
      std::ofstream out(path, std::ios::binary);
      out.write(req.body.data(), static_cast<std::streamsize>(req.body.size()));
    }
    struct Cleanup {
      std::filesystem::path p;
      ~Cleanup() { std::error_code ec; std::filesystem::remove(p, ec); }
    } cleanup{path};
    send_json(res, store::import_files(store_, {path.string()}).to_json());
  });

  // HTML pages.
  s.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    std::string q = param(req, "q");
    send_html(res, home_page(store::search(store_, q, 200), q));
  });
  s.Get(R"(/operations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, operation_page(store::operation_view(store_, param(req, "operation"), param(req, "workload", 99))));
  });
  s.Get(R"(/plots/operations/([^/]+)/(latency|floors)\.svg)", [this](const httplib::Request& req, httplib::Response& res) {
    json view = store::operation_view(store_, param(req, "operation"), param(req, "workload", 99));
    res.set_content(std::string(req.matches[2]) == "latency" ? latency_plot_svg(view) : floor_plot_svg(view),
                    "image/svg+xml");
  });
  s.Get(R"(/runs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, run_page(store::run_view(store_, param(req, "run"))));
  });
  s.Get(R"(/workloads/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, workload_page(store::workload_view(store_, param(req, "workload"))));
  });
  s.Get(R"(/implementations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, implementation_page(store::implementation_view(store_, param(req, "implementation"))));
  });
  s.Get("/compare", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, compare_page(store::compare(store_, param(req, "a"), param(req, "b"))));
  });
  s.Get("/resolve", [this](const httplib::Request& req, httplib::Response& res) {
    send_html(res, resolve_page(store::resolve(store_, resolve_query(req))));
  });
  s.Get("/records", [this](const httplib::Request& req, httplib::Response& res) {
    std::string op = param(req, "operation");
    send_html(res, records_page(store::records(store_, op), op));
  });
}

}  // namespace kindex::web
