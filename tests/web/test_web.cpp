// The web door: pages rendered by headless Chromium against a server this test starts on 127.0.0.1, the JSON
// API agreeing with the CLI, and the server's guards (read-only by default, bearer token, size and rate limits,
// escaping).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "store/feed.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "support/paths.hpp"
#include "web/pages.hpp"
#include "web/server.hpp"

namespace kindex::web {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string run_command(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 65536> buf;
  int fd = fileno(p);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n > 0) {
      out.append(buf.data(), static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  int rc = pclose(p);
  if (status) *status = rc;
  return out;
}

std::string chromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      fs::path candidate = fs::path(dirs.substr(start, end == std::string::npos ? std::string::npos : end - start)) / c;
      if (fs::exists(candidate)) return candidate.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

// Chromium's profile for this test process, in the system's temporary directory (honours TMPDIR).
std::string chromium_profile() {
  return (fs::temp_directory_path() / ("kindex-chromium-" + std::to_string(::getpid()))).string();
}

// The DOM after Chromium parsed and laid out the page.
std::string dump_dom(const std::string& url) {
  return run_command(chromium() + " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
                     "--user-data-dir=" + chromium_profile() + " --dump-dom '" + url + "' 2>/dev/null");
}

// Chromium paints the page at `url`: its screenshot is a real PNG of some size.
void expect_screenshot(const fs::path& png, const std::string& url) {
  run_command(chromium() + " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=" +
              chromium_profile() + " --window-size=1200,2400 --screenshot=" + png.string() + " '" + url + "' 2>/dev/null");
  ASSERT_TRUE(fs::exists(png)) << url;
  std::ifstream in(png, std::ios::binary);
  std::string header(8, '\0');
  in.read(header.data(), 8);
  EXPECT_EQ(header, "\x89PNG\r\n\x1a\n");
  EXPECT_GT(fs::file_size(png), 20000u);
}

// Text content of the element with this id in a Chromium DOM dump (tags stripped, entities of interest decoded).
std::string element_text(const std::string& dom, const std::string& id) {
  auto start = dom.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  start = dom.find('>', start) + 1;
  // The element ends at the matching close of its tag name.
  auto open = dom.rfind('<', start);
  std::string tag = dom.substr(open + 1, dom.find_first_of(" >", open) - open - 1);
  int depth = 1;
  size_t pos = start;
  while (depth > 0 && pos < dom.size()) {
    auto next_open = dom.find("<" + tag, pos), next_close = dom.find("</" + tag + ">", pos);
    if (next_close == std::string::npos) break;
    if (next_open != std::string::npos && next_open < next_close) {
      ++depth;
      pos = next_open + 1;
    } else {
      --depth;
      pos = next_close + 1;
    }
  }
  std::string inner = dom.substr(start, pos - 1 - start);
  std::string text = std::regex_replace(inner, std::regex("<[^>]*>"), " ");
  text = std::regex_replace(text, std::regex("&amp;"), "&");
  return std::regex_replace(text, std::regex("\\s+"), " ");
}

int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends raw bytes to 127.0.0.1:port and returns what comes back until the server closes or one response is
// complete (its Content-Length read), or timeout_s passes.
std::string raw_exchange(int port, const std::string& request, double timeout_s = 10) {
  int fd = connect_to(port);
  if (fd < 0) return "";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    auto head_end = out.find("\r\n\r\n");
    std::smatch m;
    std::string head = out.substr(0, head_end);
    if (head_end != std::string::npos && std::regex_search(head, m, std::regex("Content-Length: (\\d+)", std::regex::icase)) &&
        out.size() >= head_end + 4 + std::stoul(m[1])) {
      break;
    }
  }
  ::close(fd);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class Web : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("kindex-web-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    db_ = "sqlite:" + (dir_ / "index.db").string();
    store_ = store::Store::open(db_);
    store::import_files(*store_, {kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst",
                                  kindex::test::data_dir() + "/kernelindex/export-slice-serving.jsonl.zst"});
    ServerOptions o;
    o.port = 0;
    o.token = "s3cret-token";
    o.max_body_bytes = 1 << 20;
    o.requests_per_minute = 100000;
    server_ = std::make_unique<IndexServer>(*store_, o);
    port_ = server_->bind();
    thread_ = std::thread([] { server_->listen(); });
  }
  static void TearDownTestSuite() {
    server_->stop();
    thread_.join();
    server_.reset();
    store_.reset();
    fs::remove_all(dir_);
    fs::remove_all(chromium_profile());
  }
  static std::string base() { return "http://127.0.0.1:" + std::to_string(port_); }
  static json get_json(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get(path.c_str());
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body);
  }
  static inline fs::path dir_;
  static inline std::string db_;
  static inline std::unique_ptr<store::Store> store_;
  static inline std::unique_ptr<IndexServer> server_;
  static inline std::thread thread_;
  static inline int port_ = 0;
};

TEST_F(Web, OperationPageShowsWorkloadsRecordAndFloorInChromium) {
  ASSERT_FALSE(chromium().empty()) << "chromium is required (scripts/install-deps.sh installs it)";
  const std::string op = "gqa_paged_decode_h24_kv4_d128_ps64";
  std::string workload;
  const json view = get_json("/api/operations/" + op);
  for (const auto& w : view["workloads"]) {
    if (w["axes"]["num_pages"] == 425) workload = w["id"];
  }
  ASSERT_FALSE(workload.empty());
  std::string dom = dump_dom(base() + "/operations/" + op + "?workload=" + workload);
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium did not render the page";
  // 20 workloads: in the picker and in the workload table.
  EXPECT_EQ(element_text(dom, "workload-count"), "20 cases");
  EXPECT_EQ(count(element_text(dom, "workload-picker"), " runs)"), 20);
  EXPECT_EQ(count(dom, "<tr class=\"workload"), 20);
  // FlashInfer's baseline record on B200 with the 6.96 us headroom-v1 floor.
  std::string headline = element_text(dom, "headline");
  EXPECT_NE(headline.find("359.8 µs"), std::string::npos) << headline;
  EXPECT_NE(headline.find("flashinfer_wrapper_1b7890"), std::string::npos) << headline;
  EXPECT_NE(dom.find("Estimated floor <b>6.96 µs</b> · record 51.67× above it"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<td class=\"rank\">1</td><td><a href=\"/runs/[^\"]+\">flashinfer_wrapper_1b7890")));
  EXPECT_NE(dom.find("NVIDIA B200"), std::string::npos);
  // Semantics and both plots are present.
  EXPECT_NE(element_text(dom, "io").find("kv_last_page_len"), std::string::npos);
  EXPECT_NE(dom.find("id=\"latency-plot\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"floor-plot\""), std::string::npos);
  // And it paints: a screenshot of the page is a real PNG.
  expect_screenshot(dir_ / "operation.png", base() + "/operations/" + op);
}

// The serving pages: the Pareto plot and tables Chromium renders agree with the JSON API, which agrees with the
// CLI; bad parameters are refused naming them.
TEST_F(Web, ServingPagesShowTheParetoFrontInChromium) {
  ASSERT_FALSE(chromium().empty()) << "chromium is required (scripts/install-deps.sh installs it)";
  const std::string kindex = kindex::test::binary_dir() + "/bin/kindex", store = " --store " + db_.substr(7);
  const json overview = get_json("/api/serving");
  EXPECT_EQ(overview["counts"]["serving_runs"], 145);
  EXPECT_EQ(overview, json::parse(run_command(kindex + " serving list --json" + store)));
  const std::string gpu = "NVIDIA H200-SXM-141GB", query = "?gpu=NVIDIA%20H200-SXM-141GB";
  const json view = get_json("/api/serving/models/mlperf-llama2-70b" + query);
  EXPECT_EQ(view, json::parse(run_command(kindex + " serving show --json mlperf-llama2-70b '" + gpu + "'" + store)));
  ASSERT_FALSE(view["points"].empty());
  const std::string dom = dump_dom(base() + "/serving/models/mlperf-llama2-70b" + query);
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium did not render the page";
  const auto plot_start = dom.find("id=\"serving-plot\"");
  ASSERT_NE(plot_start, std::string::npos);
  const std::string plot = dom.substr(plot_start, dom.find("</svg>", plot_start) - plot_start);
  EXPECT_EQ(count(plot, "<circle"), static_cast<int>(view["points"].size()));
  EXPECT_EQ(count(plot, "class=\"front\""), static_cast<int>(view["configurations"].size()));
  const std::string front_table = dom.substr(dom.find("id=\"front\""), dom.find("id=\"points\"") - dom.find("id=\"front\""));
  EXPECT_EQ(count(front_table, "<tr class=\"serving-run\""), static_cast<int>(view["front"].size()));
  EXPECT_NE(element_text(dom, "plotted").find("per accelerator"), std::string::npos);
  // The overview links each model and GPU, the GPU's name percent-encoded.
  auto overview_page = httplib::Client("127.0.0.1", port_).Get("/serving");
  EXPECT_NE(overview_page->body.find("href=\"/serving/models/mlperf-llama2-70b?gpu=NVIDIA%20H200-SXM-141GB\""), std::string::npos);
  httplib::Client c("127.0.0.1", port_);
  auto svg = c.Get(("/plots/serving/models/mlperf-llama2-70b.svg" + query).c_str());
  ASSERT_EQ(svg->status, 200);
  EXPECT_EQ(svg->get_header_value("Content-Type"), "image/svg+xml");
  EXPECT_EQ(count(svg->body, "<circle"), static_cast<int>(view["points"].size()));
  // A run's page, and resolve-serving's page and JSON (the same as the CLI's).
  const std::string run_id = view["front"][0];
  const std::string run_dom = dump_dom(base() + "/serving/runs/" + run_id);
  EXPECT_NE(element_text(run_dom, "throughput").find("output tokens/s"), std::string::npos);
  const json resolved = get_json("/api/serving/resolve?model=llama2-70b&gpu=B200&ttft=2000");
  EXPECT_EQ(resolved, json::parse(run_command(kindex + " serving resolve --json llama2-70b B200 --ttft 2000" + store)));
  ASSERT_TRUE(resolved["best"].is_object());
  const std::string resolve_dom = dump_dom(base() + "/serving/resolve?model=llama2-70b&gpu=B200&ttft=2000&tpot=");
  EXPECT_NE(element_text(resolve_dom, "best").find(resolved["best"]["configuration"].get<std::string>()), std::string::npos);
  // Bad parameters: named, escaped, never a server error.
  auto bad = c.Get("/api/serving/resolve?model=llama2-70b&ttft=fast");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("ttft"), std::string::npos);
  EXPECT_EQ(c.Get("/api/serving/resolve?model=llama2-70b&color=red")->status, 400);
  EXPECT_EQ(c.Get("/api/serving/models/no-such-model")->status, 404);
  auto escaped = c.Get("/serving/models/%3Cb%3Ex");
  EXPECT_EQ(escaped->status, 404);
  EXPECT_EQ(escaped->body.find("<b>x"), std::string::npos);
  // It paints: a screenshot of the Pareto page is a real PNG.
  expect_screenshot(dir_ / "serving.png", base() + "/serving/models/mlperf-llama2-70b" + query);
}

TEST_F(Web, RunPageShowsRankSpeedupAndManifestInChromium) {
  ASSERT_FALSE(chromium().empty()) << "chromium is required (scripts/install-deps.sh installs it)";
  // A FlashInfer-Bench trace run of the seed 000 kind that is not #1 in its cohort.
  json view = get_json("/api/operations/gqa_paged_decode_h32_kv4_d128_ps1");
  std::string run;
  json expected;
  for (const auto& c : view["cohorts"]) {
    if (c["runs"].size() >= 2) run = c["runs"][1]["id"];
  }
  if (run.empty()) run = view["cohorts"][0]["runs"][0]["id"];
  expected = get_json("/api/runs/" + run);
  std::string dom = dump_dom(base() + "/runs/" + run);
  ASSERT_NE(dom.find("</html>"), std::string::npos);
  std::string rank = element_text(dom, "rank");
  EXPECT_NE(rank.find("Rank " + expected["rank"].dump() + " in its comparison group"), std::string::npos) << rank;
  std::string speedup = element_text(dom, "speedup");
  std::string want = format_ratio(expected["speedupFactor"].get<double>()) + " reference";
  EXPECT_NE(speedup.find(want), std::string::npos) << speedup << " vs " << want;
  std::string manifest = element_text(dom, "manifest");
  EXPECT_NE(manifest.find("\"kind\": \"BenchmarkRun\""), std::string::npos);
  EXPECT_NE(manifest.find(expected["run"]["runDigest"].get<std::string>().substr(0, 0) + "flashinfer_bench_trace"), std::string::npos);
  EXPECT_NE(element_text(dom, "citation").find(expected["run"]["runDigest"].get<std::string>()), std::string::npos);
  EXPECT_NE(element_text(dom, "latency").find("µs"), std::string::npos);
}

TEST_F(Web, ApiAndCliAgree) {
  std::string cli = kindex::test::binary_dir() + "/bin/kindex";
  ASSERT_TRUE(fs::exists(cli)) << cli << " not built (build the kindex_cli target)";
  std::string store = " --store " + db_.substr(7);
  json api = get_json("/api/resolve?operation=gqa_paged_decode_h24_kv4_d128_ps64&axes=batch_size%3D1%2Cnum_pages%3D425&gpu=B200");
  int status = 0;
  json from_cli = json::parse(run_command(cli + " resolve --json" + store +
                                          " gqa_paged_decode_h24_kv4_d128_ps64 batch_size=1 num_pages=425 --gpu B200", &status));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(api, from_cli);
  EXPECT_EQ(api["exact"]["ranked"][0]["implementation"], "flashinfer_wrapper_1b7890");
  EXPECT_EQ(get_json("/api/search?q=h24"), json::parse(run_command(cli + " search --json" + store + " h24")));
  json op_api = get_json("/api/operations/gqa_paged_decode_h24_kv4_d128_ps64");
  json op_cli = json::parse(run_command(cli + " show operation --json" + store + " gqa_paged_decode_h24_kv4_d128_ps64"));
  EXPECT_EQ(op_api, op_cli);
  json rec_api = get_json("/api/records?operation=gqa_paged_decode_h24_kv4_d128_ps64");
  EXPECT_EQ(rec_api, json::parse(run_command(cli + " records --json" + store + " gqa_paged_decode_h24_kv4_d128_ps64")));
  EXPECT_EQ(rec_api.size(), 20u);
}

TEST_F(Web, WritesNeedTheTokenAndBodiesAreLimited) {
  httplib::Client c("127.0.0.1", port_);
  std::string manifest = "{\"apiVersion\":\"kernelindex.dev/v1alpha1\",\"kind\":\"SoftwareProject\",\"metadata\":{\"name\":\"p\"},"
                         "\"spec\":{\"name\":\"Web Project\"}}";
  auto none = c.Post("/api/import", manifest, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  EXPECT_EQ(c.Post("/api/import", wrong, manifest, "application/json")->status, 401);
  httplib::Headers right = {{"Authorization", "Bearer s3cret-token"}};
  auto ok = c.Post("/api/import", right, manifest, "application/json");
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["inserted"]["manifests"], 1);
  EXPECT_EQ(json::parse(c.Post("/api/import", right, manifest, "application/json")->body)["totalInserted"], 0);
  // Invalid manifests are refused with the problem named.
  std::string bad = manifest;
  bad.replace(bad.find("\"name\":\"Web Project\""), 20, "\"name\":\"x\",\"popularity\":1");
  auto refused = c.Post("/api/import", right, bad, "application/json");
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("popularity"), std::string::npos);
  // A declared size over the limit is answered before the body is sent (the client may wait for 100 Continue).
  std::string big = raw_exchange(port_, "POST /api/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n"
                                    "Content-Length: " + std::to_string(2 << 20) + "\r\n\r\n");
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  std::string expect = raw_exchange(port_, "POST /api/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n"
                                       "Expect: 100-continue\r\nContent-Length: " + std::to_string(2 << 20) + "\r\n\r\n");
  EXPECT_EQ(expect.rfind("HTTP/1.1 413", 0), 0u) << expect;
  EXPECT_EQ(c.Get("/api/runs/..%2F..%2Fetc%2Fpasswd")->status, 404);
}

TEST_F(Web, ReadOnlyServerRefusesWritesAndRateLimits) {
  ServerOptions o;
  o.port = 0;
  o.requests_per_minute = 5;
  IndexServer server(*store_, o);
  int port = server.bind();
  std::thread t([&] { server.listen(); });
  httplib::Client c("127.0.0.1", port);
  EXPECT_EQ(c.Post("/api/import", "{}", "application/json")->status, 403);
  int limited = 0;
  for (int i = 0; i < 8; ++i) limited += c.Get("/api/search?q=gqa")->status == 429;
  EXPECT_EQ(limited, 4);  // 1 POST + 4 GETs pass in this minute's window of 5
  server.stop();
  t.join();
}

TEST_F(Web, EverythingFromDataIsEscaped) {
  EXPECT_EQ(html_escape("<script>alert('x')</script>&\""), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;");
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/?q=%3Cscript%3Ealert(1)%3C/script%3E");
  EXPECT_EQ(r->body.find("<script>"), std::string::npos);
  EXPECT_NE(r->body.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(c.Get("/operations/%3Cimg%20src=x%3E")->body.find("<img"), std::string::npos);
}

TEST_F(Web, ComparePageAndPlots) {
  json view = get_json("/api/operations/gqa_paged_decode_h20_kv4_d128_ps1");
  ASSERT_FALSE(view["cohorts"].empty());
  std::string a = view["cohorts"][0]["runs"][0]["id"];
  std::string b = view["cohorts"].back()["runs"][0]["id"];
  httplib::Client c("127.0.0.1", port_);
  auto page = c.Get(("/compare?a=" + a + "&b=" + b).c_str());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("id=\"compare\""), std::string::npos);
  auto svg = c.Get("/plots/operations/gqa_paged_decode_h24_kv4_d128_ps64/latency.svg");
  EXPECT_EQ(svg->status, 200);
  EXPECT_EQ(svg->get_header_value("Content-Type"), "image/svg+xml");
  EXPECT_EQ(count(svg->body, "<circle"), 20);  // one implementation, 20 workloads
  auto floors = c.Get("/plots/operations/gqa_paged_decode_h24_kv4_d128_ps64/floors.svg");
  EXPECT_EQ(count(floors->body, "<rect x=\"360.0\""), 20);
}


TEST_F(Web, InvalidUtf8InPathOrQueryIsRefusedAndTheServerLivesOn) {
  httplib::Client c("127.0.0.1", port_);
  for (const std::string path : {"/api/runs/%FF", "/api/operations/%FF", "/api/workloads/%C0%AF", "/api/implementations/%ED%A0%80",
                                 "/api/search?q=%FF", "/api/resolve?operation=%FF", "/api/records?operation=%FE",
                                 "/api/compare?a=%FF&b=x", "/api/resolve?operation=x&%FF=1", "/runs/%FF", "/?q=%F5%80%80%80"}) {
    auto r = c.Get(path.c_str());
    ASSERT_TRUE(r) << path << ": no response (the server died?)";
    EXPECT_EQ(r->status, 400) << path;
    EXPECT_NE(r->body.find("not valid UTF-8"), std::string::npos) << path << ": " << r->body;
    if (path.rfind("/api/", 0) == 0) {
      EXPECT_NO_THROW(json::parse(r->body)) << path;
    }
    ASSERT_EQ(c.Get("/api/search?q=h24")->status, 200) << "after " << path;
  }
  // Valid multi-byte UTF-8 is not refused, and the same router answers raw bytes.
  EXPECT_EQ(c.Get("/api/search?q=%C2%B5s")->status, 200);
  std::string raw = server_->serve_bytes("GET /api/runs/%FF HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(raw.rfind("HTTP/1.1 400", 0), 0u) << raw;
}

TEST_F(Web, HalfOpenConnectionsDoNotStallOtherClients) {
  ServerOptions o;
  o.port = 0;
  o.requests_per_minute = 100000;
  o.head_timeout_s = 2;
  o.keep_alive_timeout_s = 2;
  IndexServer server(*store_, o);
  int port = server.bind();
  std::thread t([&] { server.listen(); });
  // 48 connections that never finish a request: half send nothing, half stop inside the headers.
  std::vector<int> idle;
  for (int i = 0; i < 48; ++i) {
    int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    if (i % 2) {
      std::string partial = "GET /api/search?q=h24 HTTP/1.1\r\nHost: x\r\n";
      ::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL);
    }
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = c.Get("/api/search?q=h24");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(seconds_since(start), 1.0) << "request " << i << " waited behind the idle connections";
  }
  // The server closes them itself: within the head / keep-alive timeout, not whenever the client gives up.
  auto start = std::chrono::steady_clock::now();
  int closed = 0;
  for (int fd : idle) {
    // (those cut off inside their headers get a 400 first)
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    ssize_t n = 1;
    while (n > 0 && ::poll(&p, 1, 6000) > 0) n = ::recv(fd, buf, sizeof buf, 0);
    closed += n == 0;
    ::close(fd);
  }
  EXPECT_EQ(closed, 48);
  EXPECT_LT(seconds_since(start), 5.0);
  server.stop();
  t.join();
}

TEST_F(Web, SecondServerOnAPortInUseFailsClearly) {
  ServerOptions o;
  o.port = port_;
  IndexServer second(*store_, o);
  try {
    second.bind();
    FAIL() << "a second server bound port " << port_;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(port_)), std::string::npos) << e.what();
  }
}

TEST_F(Web, KeepAliveRequestsDoNotWaitForDelayedAcks) {
  // A response written as head and body in two sends: with Nagle on, the body waits for the client's delayed
  // ACK of the head (~40 ms on Linux) on every request of a keep-alive connection.
  httplib::Client c("127.0.0.1", port_);
  c.set_keep_alive(true);
  std::vector<double> ms;
  for (int i = 0; i < 30; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = c.Get("/api/search?q=h24");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    ms.push_back(seconds_since(start) * 1000);
  }
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[ms.size() / 2], 20.0) << "median of 30 keep-alive requests";
}

TEST_F(Web, UnauthenticatedLargeBodyIsRefusedBeforeItIsRead) {
  // 60 MB declared and sent without a token: the 401 comes at once and the server stops reading; the client
  // cannot push the whole body (before: the server read all 60 MB, then answered).
  int fd = connect_to(port_);
  ASSERT_GE(fd, 0);
  const size_t total = 60u << 20;
  std::string head = "POST /api/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(total) + "\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::atomic<size_t> sent{0};
  std::thread sender([&] {
    std::string chunk(1 << 16, 'x');
    while (sent < total) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 3000) <= 0) break;  // the server stopped reading
      ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  });
  std::string response;
  auto start = std::chrono::steady_clock::now();
  char buf[4096];
  while (response.find("\r\n\r\n") == std::string::npos && seconds_since(start) < 10) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  sender.join();
  ::close(fd);
  EXPECT_EQ(response.rfind("HTTP/1.1 401", 0), 0u) << response;
  EXPECT_LT(sent.load(), total / 2) << "the server read the body it refused";
  // With "Expect: 100-continue" the client is told before it sends anything.
  std::string r = raw_exchange(port_, "POST /api/import HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                                      std::to_string(total) + "\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 401", 0), 0u) << r;
  // A body on any other request is refused without being read.
  r = raw_exchange(port_, "GET /api/search?q=h24 HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
}

TEST_F(Web, FormEncodedUploadOverEightKilobytesIsImported) {
  // `curl -d @file` sends application/x-www-form-urlencoded; the body is still the file.
  std::string manifest = "{\"apiVersion\":\"kernelindex.dev/v1alpha1\",\"kind\":\"SoftwareProject\",\"metadata\":{\"name\":\"form\"},"
                         "\"spec\":{\"name\":\"Form Upload Project\"}}" + std::string(12000, ' ');
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Post("/api/import", {{"Authorization", "Bearer s3cret-token"}}, manifest, "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["inserted"]["manifests"], 1);
  // Still bounded by --max-body (1 MB here), with the same content type.
  std::string too_big = raw_exchange(port_, "POST /api/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n"
                                        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1048577\r\n\r\n");
  EXPECT_EQ(too_big.rfind("HTTP/1.1 413", 0), 0u) << too_big;
}

TEST_F(Web, ErrorBodiesDoNotNameServerPaths) {
  httplib::Client c("127.0.0.1", port_);
  std::string bad = "{\"apiVersion\":\"kernelindex.dev/v1alpha1\",\"kind\":\"SoftwareProject\",\"metadata\":{\"name\":\"p\"},"
                    "\"spec\":{\"name\":\"x\",\"popularity\":1}}";
  auto r = c.Post("/api/import", {{"Authorization", "Bearer s3cret-token"}}, bad, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("request body"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("popularity"), std::string::npos) << r->body;
  const std::string tmp = fs::temp_directory_path().string();
  for (const auto& body : {r->body, c.Get("/api/runs/00000000")->body, c.Get("/operations/no-such-op")->body}) {
    EXPECT_EQ(body.find(tmp), std::string::npos) << body;
    EXPECT_EQ(body.find("kindex-upload"), std::string::npos) << body;
    EXPECT_EQ(body.find(dir_.string()), std::string::npos) << body;
  }
}

TEST_F(Web, ConcurrentImportFailsWithBusyStore) {
  // Another process holds the store's write lock (an import in progress); the server's store gives up after
  // 1.5 s here (30 s by default) and says the store is busy. A second upload meanwhile is told at once.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  store_->db().script("PRAGMA busy_timeout=1500");
  std::string manifest = "{\"apiVersion\":\"kernelindex.dev/v1alpha1\",\"kind\":\"SoftwareProject\",\"metadata\":{\"name\":\"busy\"},"
                         "\"spec\":{\"name\":\"Busy Project\"}}";
  httplib::Headers auth = {{"Authorization", "Bearer s3cret-token"}};
  int first_status = 0;
  std::string first_body;
  std::thread t([&] {
    httplib::Client c("127.0.0.1", port_);
    if (auto r = c.Post("/api/import", auth, manifest, "application/json")) {
      first_status = r->status;
      first_body = r->body;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client c("127.0.0.1", port_);
  auto start = std::chrono::steady_clock::now();
  auto second = c.Post("/api/import", auth, manifest, "application/json");
  double second_s = seconds_since(start);
  t.join();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  store_->db().script("PRAGMA busy_timeout=30000");
  ASSERT_TRUE(second);
  EXPECT_EQ(first_status, 503) << first_body;
  EXPECT_NE(first_body.find("store busy: another process is writing to it"), std::string::npos) << first_body;
  EXPECT_EQ(first_body.find("SQL"), std::string::npos) << first_body;
  EXPECT_EQ(first_body.find(dir_.string()), std::string::npos) << first_body;
  EXPECT_EQ(second->status, 503) << second->body;
  EXPECT_NE(second->body.find("another import is in progress"), std::string::npos) << second->body;
  EXPECT_LT(second_s, 0.5);
  // With the lock released the same upload goes in.
  auto ok = c.Post("/api/import", auth, manifest, "application/json");
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// A page first asked for by a client that accepts compression (as Chromium does) is sent plain to the next one:
// the compressed body is not what the response cache keeps.
TEST_F(Web, ACompressedResponseIsNotServedFromTheCacheToAnotherClient) {
  httplib::Client c("127.0.0.1", port_);
  const std::string path = "/records?operation=gqa_paged_decode_h24_kv4_d128_ps64&compression=1";  // no other test asks it
  auto compressed = c.Get(path.c_str(), {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_EQ(compressed->status, 200);
  auto plain = c.Get(path.c_str());
  ASSERT_EQ(plain->status, 200);
  EXPECT_FALSE(plain->has_header("Content-Encoding"));
  EXPECT_EQ(plain->body.rfind("<!DOCTYPE html>", 0), 0u) << plain->body.substr(0, 40);
}

TEST_F(Web, OperationPageCountsEligibleRunsAcrossWorkloadsAndPlotsAlongAnAxis) {
  // ps64: one implementation measured on each of 20 workloads (KernelIndex's page says 20 eligible runs).
  const std::string op = "gqa_paged_decode_h24_kv4_d128_ps64";
  json view = get_json("/api/operations/" + op);
  EXPECT_EQ(view["eligibleRunsAllWorkloads"], 20);
  EXPECT_EQ(view["eligibleRuns"], 1);
  httplib::Client c("127.0.0.1", port_);
  auto page = c.Get(("/operations/" + op).c_str());
  EXPECT_NE(page->body.find("20 eligible runs across 20 workloads</span> (1 on the selected one)"), std::string::npos);
  // The latency plot runs along the axis with the most distinct values, in increasing order.
  std::string axis;
  size_t most = 0;
  std::map<std::string, std::set<int64_t>> distinct;
  for (const auto& w : view["workloads"])
    for (const auto& [k, a] : w["axes"].items()) distinct[k].insert(a.get<int64_t>());
  for (const auto& [k, vals] : distinct)
    if (vals.size() > most) most = vals.size(), axis = k;
  std::map<std::string, int64_t> value_of_label;
  for (const auto& w : view["workloads"]) value_of_label[w["label"]] = w["axes"][axis];
  std::string svg = c.Get(("/plots/operations/" + op + "/latency.svg").c_str())->body;
  EXPECT_NE(svg.find("workload, by " + axis), std::string::npos);
  std::regex circle("<circle cx=\"([0-9.]+)\"[^>]*><title>[^<·]* · ([^<]*): [^<]*</title>");
  std::vector<std::pair<double, int64_t>> points;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it) {
    std::string label = std::regex_replace((*it)[2].str(), std::regex("&amp;"), "&");
    ASSERT_TRUE(value_of_label.count(label)) << label;
    points.push_back({std::stod((*it)[1]), value_of_label[label]});
  }
  // Each cohort shows how its record stands and its timeline of record events.
  const json& cohort = view["cohorts"][0];
  ASSERT_FALSE(cohort["recordTimeline"].empty());
  EXPECT_EQ(cohort["recordTimeline"].back()["runId"], cohort["runs"][0]["id"]);
  EXPECT_EQ(cohort["recordStatus"]["holder"], cohort["runs"][0]["id"]);
  EXPECT_NE(page->body.find("<details class=\"record-timeline\"><summary>Record timeline ("), std::string::npos);
  EXPECT_NE(page->body.find("record since " + cohort["recordStatus"]["since"].get<std::string>().substr(0, 10)), std::string::npos);
  ASSERT_EQ(points.size(), 20u);
  std::sort(points.begin(), points.end());
  for (size_t i = 1; i < points.size(); ++i) EXPECT_LE(points[i - 1].second, points[i].second) << "x " << points[i].first;
}

TEST_F(Web, CachedAnswersFollowTheStore) {
  const std::string op = "/api/operations/gqa_paged_decode_h24_kv4_d128_ps64";
  httplib::Client c("127.0.0.1", port_);
  auto first = c.Get(op.c_str());
  auto again = c.Get(op.c_str());
  ASSERT_TRUE(first && again);
  EXPECT_EQ(again->get_header_value("X-Kindex-Cache"), "hit");
  EXPECT_EQ(first->body, again->body);
  // Another process changes the store (here: another connection retracts the record holder): the next answer
  // is computed afresh and no longer lists the run.
  json view = json::parse(first->body);
  const std::string holder = view["cohorts"][0]["runs"][0]["id"];
  {
    auto other = store::Store::open(db_);
    other->retract_run(holder, "test: withdrawn", "2026-12-03T00:00:00Z");
  }
  auto after = c.Get(op.c_str());
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->has_header("X-Kindex-Cache"));
  for (const auto& cohort : json::parse(after->body)["cohorts"]) {
    for (const auto& run : cohort["runs"]) EXPECT_NE(run["id"], holder) << "the retracted run is still ranked";
  }
  // Failures are not kept.
  c.Get("/api/runs/00000000");
  EXPECT_FALSE(c.Get("/api/runs/00000000")->has_header("X-Kindex-Cache"));
}

TEST_F(Web, LeaderboardPerImplementationWithFiltersLinkedFromTheOperationPage) {
  const std::string op = "gqa_paged_decode_h24_kv4_d128_ps64";
  httplib::Client c("127.0.0.1", port_);
  json lb = get_json("/api/operations/" + op + "/leaderboard");
  EXPECT_EQ(lb["operation"]["name"], op);
  const std::string slug = lb["operation"]["slug"];
  auto op_page = c.Get(("/operations/" + op).c_str());
  EXPECT_NE(op_page->body.find("href=\"/operations/" + slug + "/leaderboard\" id=\"leaderboard-link\""), std::string::npos);
  ASSERT_FALSE(lb["entries"].empty());
  // ps64: one implementation on one GPU (B200), passed on its workloads: its own baseline, one latency per workload.
  const json& first = lb["entries"][0];
  EXPECT_EQ(lb["baseline"]["id"], first["id"]);
  EXPECT_EQ(first["avgSpeedup"], 1.0);
  const json view = get_json("/api/operations/" + op);
  EXPECT_EQ(first["latency"]["count"], view["plots"]["latency"].size());
  EXPECT_GE(first["latency"]["count"], 19);
  EXPECT_EQ(first["passRate"], 1.0);
  int64_t runs = 0;
  for (const auto& e : lb["entries"]) runs += e["passed"].get<int64_t>();
  EXPECT_EQ(runs, view["eligibleRunsAllWorkloads"]);
  // The page: a table row per entry, the filter form (a plain GET form), and the latency distribution plot.
  auto page = c.Get(("/operations/" + op + "/leaderboard").c_str());
  ASSERT_EQ(page->status, 200);
  EXPECT_EQ(count(page->body, "<tr class=\"entry"), static_cast<int>(lb["entries"].size()));
  EXPECT_NE(page->body.find("<form method=\"get\" action=\"/operations/" + slug + "/leaderboard\" id=\"filters\">"), std::string::npos);
  EXPECT_NE(page->body.find("id=\"leaderboard-plot\""), std::string::npos);
  auto svg = c.Get(("/plots/operations/" + op + "/leaderboard.svg").c_str());
  EXPECT_EQ(svg->get_header_value("Content-Type"), "image/svg+xml");
  EXPECT_EQ(count(svg->body, "<circle"), first["latency"]["count"].get<int>());
  // Filters narrow the entries; a value from the request comes back escaped.
  EXPECT_TRUE(get_json("/api/operations/" + op + "/leaderboard?device=H100")["entries"].empty());
  EXPECT_EQ(get_json("/api/operations/" + op + "/leaderboard?device=b200")["entries"].size(), lb["entries"].size());
  auto filtered = c.Get(("/operations/" + op + "/leaderboard?author=%3Cb%3Ex%22").c_str());
  EXPECT_NE(filtered->body.find("No implementation matches these filters."), std::string::npos);
  EXPECT_EQ(filtered->body.find("<b>x"), std::string::npos);
  EXPECT_NE(filtered->body.find("value=\"&lt;b&gt;x&quot;\""), std::string::npos);
  auto unknown = c.Get(("/api/operations/" + op + "/leaderboard?baseline=nobody").c_str());
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("baseline"), std::string::npos);
  // The CLI prints the same JSON.
  std::string cli = kindex::test::binary_dir() + "/bin/kindex";
  ASSERT_TRUE(fs::exists(cli)) << cli << " not built (build the kindex_cli target)";
  EXPECT_EQ(lb, json::parse(run_command(cli + " leaderboard --json --store " + db_.substr(7) + " " + op)));
}

TEST_F(Web, HomePageSearchesAsYouTypeAndWithoutTheScript) {
  httplib::Client c("127.0.0.1", port_);
  // Without the script: the form submits to /?q= and the server answers with the matching operations.
  auto page = c.Get("/?q=ps64");
  EXPECT_NE(page->body.find("<form method=\"get\" action=\"/\" id=\"search\""), std::string::npos);
  EXPECT_EQ(count(page->body, "<a href=\"/operations/"), static_cast<int>(get_json("/api/search?q=ps64").size()));
  // With it: the page loads /assets/search.js (the only script; the policy allows no inline script), which asks
  // /api/search as the user types and builds rows with textContent.
  EXPECT_NE(page->body.find("<script src=\"/assets/search.js\" defer></script>"), std::string::npos);
  EXPECT_EQ(count(page->body, "<script"), 1);
  std::string csp = page->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-inline'; script"), std::string::npos);
  EXPECT_EQ(csp.find("script-src 'self' 'unsafe-inline'"), std::string::npos);
  auto js = c.Get("/assets/search.js");
  ASSERT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("/api/search?q="), std::string::npos);
  EXPECT_NE(js->body.find("textContent"), std::string::npos);
  EXPECT_EQ(js->body.find("innerHTML"), std::string::npos);
  // In Chromium the script runs on the page without breaking it: the table is still there after load.
  ASSERT_FALSE(chromium().empty()) << "chromium is required (scripts/install-deps.sh installs it)";
  std::string dom = dump_dom(base() + "/?q=ps64");
  EXPECT_NE(dom.find("id=\"operations\""), std::string::npos);
  EXPECT_EQ(count(dom, "<a href=\"/operations/"), count(page->body, "<a href=\"/operations/"));
}

}  // namespace
}  // namespace kindex::web

namespace kindex::web {
namespace {

// The feed routes: one thing's Atom feed holds the same entries, in the same order, as /api/feed for it; a bad count,
// an unknown kind or an operation the store lacks is answered, never a crash. (Atom validity: test_feed_atom.py.)
TEST_F(Web, FeedRoutesAnswerOneThingAndRefuseBadRequests) {
  httplib::Client c("127.0.0.1", port_);
  auto atom = c.Get("/feeds/model/llama-3-1-8b.xml?limit=50");
  ASSERT_TRUE(atom);
  ASSERT_EQ(atom->status, 200) << atom->body;
  EXPECT_EQ(atom->get_header_value("Content-Type"), "application/atom+xml; charset=utf-8");
  store::FeedQuery q;
  q.limit = 50;
  q.only = store::resolve_follow(*store_, "model", "llama-3-1-8b");
  const json expected = store::feed(*store_, q);
  ASSERT_FALSE(expected["events"].empty());
  size_t at = 0;
  for (const auto& e : expected["events"]) {
    at = atom->body.find("<id>urn:kindex:" + e["id"].get<std::string>() + "</id>", at);
    ASSERT_NE(at, std::string::npos) << e["id"] << " missing or out of order";
  }
  EXPECT_NE(atom->body.find("<link rel=\"self\" href=\"http://127.0.0.1:" + std::to_string(port_) +
                            "/feeds/model/llama-3-1-8b.xml\"/>"),
            std::string::npos);
  EXPECT_EQ(c.Get("/feed.xml?limit=0")->status, 400);
  EXPECT_EQ(c.Get("/feed.xml?since=yesterday")->status, 400);
  EXPECT_EQ(c.Get("/feeds/planet/mars.xml")->status, 404);
  EXPECT_EQ(c.Get("/feeds/operation/no-such-op.xml")->status, 404);
  // A Host header that is not a plain host gives relative links, never text of its own in the document.
  std::string raw = server_->serve_bytes("GET /feed.xml HTTP/1.1\r\nHost: a\"><x y=\"\r\n\r\n");
  EXPECT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u) << raw;
  EXPECT_EQ(raw.find("<x y="), std::string::npos) << raw;
  EXPECT_NE(raw.find("<link rel=\"self\" href=\"/feed.xml\"/>"), std::string::npos) << raw;
}

}  // namespace
}  // namespace kindex::web
