// The web door: pages rendered by headless Chromium against a server this test starts on 127.0.0.1, the JSON
// API agreeing with the CLI, and the server's guards (read-only by default, bearer token, size and rate limits,
// escaping).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

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

class Web : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("kindex-web-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    db_ = "sqlite:" + (dir_ / "index.db").string();
    store_ = store::Store::open(db_);
    store::import_files(*store_, {kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"});
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
  fs::path png = dir_ / "operation.png";
  run_command(chromium() + " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=" +
              chromium_profile() + " --window-size=1200,2400 --screenshot=" + png.string() + " '" + base() +
              "/operations/" + op + "' 2>/dev/null");
  ASSERT_TRUE(fs::exists(png));
  std::ifstream in(png, std::ios::binary);
  std::string header(8, '\0');
  in.read(header.data(), 8);
  EXPECT_EQ(header, "\x89PNG\r\n\x1a\n");
  EXPECT_GT(fs::file_size(png), 20000u);
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
  EXPECT_EQ(c.Post("/api/import", right, std::string(2 << 20, 'x'), "text/plain")->status, 413);
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

}  // namespace
}  // namespace kindex::web
