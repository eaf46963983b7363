#include "web/atom.hpp"

#include <cctype>

#include "evidence/jcs.hpp"
#include "evidence/manifest.hpp"
#include "web/pages.hpp"

namespace kindex::web {

using nlohmann::json;

namespace {

// Text as XML character data: escaped, without the control characters XML 1.0 forbids, and (data that is not
// UTF-8) with its bytes above ASCII replaced, so that any store gives a well-formed document.
std::string xml(const std::string& text) {
  const bool utf8 = evidence::valid_utf8(text);
  std::string clean;
  for (unsigned char c : text) {
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') continue;
    clean += !utf8 && c >= 0x80 ? '?' : static_cast<char>(c);
  }
  return html_escape(clean);
}

// A path as an IRI: bytes other than unreserved ones and the path's own separators percent-encoded (a GPU's name in
// /feeds/gpu/NVIDIA H200.xml has a space).
std::string iri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' || c == ':' || c == '?' ||
        c == '=' || c == '&') {
      out += static_cast<char>(c);
    } else {
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

std::string measured(const json& run) {
  if (!run.is_object()) return "none";
  std::string out = run["implementation"].is_string() ? run["implementation"].get<std::string>() : "a run";
  if (run["latencyNs"].is_number()) out += " " + format_ns(run["latencyNs"].get<double>());
  return out;
}

std::string on_gpu(const json& run) {
  return run.is_object() && run["gpu"].is_string() ? " on " + run["gpu"].get<std::string>() : std::string();
}

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

}  // namespace

std::string feed_event_title(const json& e) {
  const std::string kind = text(e["kind"]);
  const json& run = e["run"];
  const json& previous = e["previous"];
  const std::string ratio = e["ratio"].is_number() ? format_ratio(e["ratio"].get<double>()) : "";
  const std::string operation = text(e["operation"]["name"]);
  if (kind == "rerun")
    return "Rerun of " + (previous.is_object() ? measured(previous) + on_gpu(previous) : "run " + text(e["originalRunDigest"])) +
           ": " + measured(run) + on_gpu(run) + (ratio.empty() ? "" : " (" + ratio + " the original)");
  if (kind == "new_run") return "New run of " + operation + ": " + measured(run) + on_gpu(run);
  const std::string gpu = run.is_object() ? on_gpu(run) : on_gpu(previous);
  if (kind == "new_record") return "New record in " + operation + gpu + ": " + measured(run);
  const std::string cause = text(e["cause"]);
  return "Record moved in " + operation + gpu + ": " + measured(previous) + " → " + measured(run) +
         (ratio.empty() ? "" : " (" + ratio + ")") +
         (cause.empty() || cause == "new_run" ? "" : ", " + cause);
}

std::string atom_feed(const json& feed, const std::string& base, const std::string& self, const std::string& title) {
  const json& events = feed["events"];
  const std::string updated = events.empty() ? evidence::utc_timestamp_now() : text(events[0]["at"]);
  std::string out = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">\n";
  out += "<id>urn:kindex:feed:" + xml(iri(self)) + "</id>\n<title>" + xml(title) + "</title>\n<updated>" + xml(updated) +
         "</updated>\n<author><name>kindex</name></author>\n<generator>kindex</generator>\n<link rel=\"self\" href=\"" +
         xml(base + iri(self)) + "\"/>\n<link rel=\"alternate\" href=\"" + xml(base + "/") + "\"/>\n";
  for (const auto& e : events) {
    const std::string headline = feed_event_title(e);
    out += "<entry>\n<id>urn:kindex:" + xml(text(e["id"])) + "</id>\n<title>" + xml(headline) + "</title>\n<updated>" +
           xml(text(e["at"])) + "</updated>\n<link rel=\"alternate\" href=\"" + xml(base + iri(text(e["href"]))) +
           "\"/>\n<category term=\"" + xml(text(e["kind"])) + "\"/>\n<summary>" +
           xml(headline + " · cohort " + text(e["cohort"])) + "</summary>\n</entry>\n";
  }
  return out + "</feed>\n";
}

}  // namespace kindex::web
