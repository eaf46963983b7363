#include "evidence/reader.hpp"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.hpp"

namespace kindex::evidence {
namespace {

std::string at_line_col(std::size_t line, std::size_t column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// ---------------------------------------------------------------- YAML

// Resolves a plain (unquoted) scalar with the YAML 1.2 core schema, as KernelIndex's YAML loader does.
nlohmann::json resolve_plain_scalar(const std::string& s, const std::string& where, const std::string& location) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex decimal_int(R"(^[-+]?[0-9]+$)");
  static const std::regex octal_int(R"(^0o[0-7]+$)");
  static const std::regex hex_int(R"(^0x[0-9a-fA-F]+$)");
  static const std::regex decimal_float(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  static const std::regex special_float(R"(^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$)");
  if (s.size() > 400) return s;  // far longer than any number; keeps the regexes off huge inputs
  const auto parse_double = [&](std::string_view text) -> nlohmann::json {
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    double d = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(d))
      throw Error(where, location, s, "number out of range");
    return d;
  };
  if (std::regex_match(s, decimal_int)) {
    std::string_view text = s;
    if (text[0] == '+') text.remove_prefix(1);
    int64_t i = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), i);
    if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return i;
    uint64_t u = 0;
    r = std::from_chars(text.data(), text.data() + text.size(), u);
    if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return u;
    return parse_double(s);  // beyond 64 bits: a JavaScript Number, like KernelIndex
  }
  if (std::regex_match(s, octal_int) || std::regex_match(s, hex_int)) {
    uint64_t u = 0;
    const int base = s[1] == 'o' ? 8 : 16;
    const auto r = std::from_chars(s.data() + 2, s.data() + s.size(), u, base);
    if (r.ec != std::errc()) throw Error(where, location, s, "integer out of range");
    return u;
  }
  if (std::regex_match(s, decimal_float)) return parse_double(s);
  if (std::regex_match(s, special_float)) throw Error(where, location, s, "infinities and NaN have no JSON form");
  return s;
}

struct YamlParser {
  yaml_parser_t parser;
  YamlParser() {
    if (!yaml_parser_initialize(&parser)) throw std::runtime_error("libyaml: cannot initialise the parser");
  }
  ~YamlParser() { yaml_parser_delete(&parser); }
};

struct YamlEvent {
  yaml_event_t event;
  bool live = false;
  ~YamlEvent() {
    if (live) yaml_event_delete(&event);
  }
};

// One open collection while building the tree.
struct Frame {
  nlohmann::json value;
  std::string pending_key;
  bool have_key = false;
  std::set<std::string> keys;
};

}  // namespace

nlohmann::json parse_yaml(std::string_view text, const std::string& where) {
  YamlParser p;
  yaml_parser_set_input_string(&p.parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  std::vector<Frame> stack;
  nlohmann::json root;
  int documents = 0;
  bool done = false;

  while (!done) {
    YamlEvent ev;
    if (!yaml_parser_parse(&p.parser, &ev.event)) {
      const auto& mark = p.parser.problem_mark;
      std::string problem = p.parser.problem ? p.parser.problem : "malformed YAML";
      if (p.parser.context) problem = std::string(p.parser.context) + ": " + problem;
      throw Error(where, at_line_col(mark.line + 1, mark.column + 1), "", "YAML syntax error: " + problem);
    }
    ev.live = true;
    const yaml_event_t& e = ev.event;
    const std::string location = at_line_col(e.start_mark.line + 1, e.start_mark.column + 1);

    const auto refuse_anchor_and_tag = [&](const yaml_char_t* anchor, const yaml_char_t* tag) {
      if (anchor)
        throw Error(where, location, "&" + std::string(reinterpret_cast<const char*>(anchor)),
                    "YAML anchors and aliases are not allowed in manifests");
      if (tag)
        throw Error(where, location, std::string(reinterpret_cast<const char*>(tag)),
                    "explicit YAML tags are not allowed in manifests");
    };
    // Places a finished value into the enclosing collection (or makes it the document).
    const auto emit = [&](nlohmann::json value) {
      if (stack.empty()) {
        root = std::move(value);
        return;
      }
      Frame& top = stack.back();
      if (top.value.is_array()) {
        top.value.push_back(std::move(value));
      } else {
        top.value[top.pending_key] = std::move(value);
        top.have_key = false;
      }
    };
    // Whether the next node of the enclosing mapping is a key (and records it).
    const auto is_key_position = [&]() { return !stack.empty() && stack.back().value.is_object() && !stack.back().have_key; };
    const auto open = [&](nlohmann::json empty) {
      if (is_key_position()) throw Error(where, location, "", "mapping keys must be plain strings, not collections");
      if (stack.size() >= static_cast<std::size_t>(kMaxDepth))
        throw Error(where, location, "", "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      stack.push_back(Frame{std::move(empty), {}, false, {}});
    };

    switch (e.type) {
      case YAML_STREAM_START_EVENT: break;
      case YAML_STREAM_END_EVENT: done = true; break;
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) throw Error(where, location, "", "more than one YAML document in a manifest");
        break;
      case YAML_DOCUMENT_END_EVENT: break;
      case YAML_ALIAS_EVENT:
        throw Error(where, location, "*" + std::string(reinterpret_cast<const char*>(e.data.alias.anchor)),
                    "YAML anchors and aliases are not allowed in manifests");
      case YAML_SCALAR_EVENT: {
        refuse_anchor_and_tag(e.data.scalar.anchor, e.data.scalar.tag);
        std::string s(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
        if (is_key_position()) {
          Frame& top = stack.back();
          if (!top.keys.insert(s).second) throw Error(where, location, s, "duplicate mapping key");
          top.pending_key = std::move(s);
          top.have_key = true;
          break;
        }
        if (e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE) emit(resolve_plain_scalar(s, where, location));
        else emit(std::move(s));
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
        refuse_anchor_and_tag(e.data.sequence_start.anchor, e.data.sequence_start.tag);
        open(nlohmann::json::array());
        break;
      case YAML_MAPPING_START_EVENT:
        refuse_anchor_and_tag(e.data.mapping_start.anchor, e.data.mapping_start.tag);
        open(nlohmann::json::object());
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        nlohmann::json value = std::move(stack.back().value);
        stack.pop_back();
        emit(std::move(value));
        break;
      }
      default: break;
    }
  }
  if (documents == 0) throw Error(where, "", "", "empty YAML document");
  return root;
}

// ---------------------------------------------------------------- JSON

namespace {

// An input iterator that publishes how far nlohmann's lexer has read, so SAX events can report line and column.
struct CountingIterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  const char** cursor = nullptr;
  reference operator*() const { return *p; }
  CountingIterator& operator++() {
    *cursor = ++p;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p == o.p; }
  bool operator!=(const CountingIterator& o) const { return p != o.p; }
};

class StrictJsonSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  StrictJsonSax(std::string_view text, const char* const* cursor, const std::string& where)
      : text_(text), cursor_(cursor), where_(where) {}
  nlohmann::json root;

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  bool string(string_t& v) override { return put(std::move(v)); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(nlohmann::json::object()); }
  bool start_array(std::size_t) override { return open(nlohmann::json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& top = stack_.back();
    if (!top.keys.insert(k).second) throw Error(where_, location(), k, "duplicate object key");
    top.pending_key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string message = ex.what();
    if (const auto pos = message.find("] "); pos != std::string::npos) message = message.substr(pos + 2);
    throw Error(where_, "", "", "malformed JSON: " + message);
  }

 private:
  std::string location() const {
    const std::size_t offset = static_cast<std::size_t>(*cursor_ - text_.data());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') line++, column = 1;
      else column++;
    }
    return at_line_col(line, column);
  }
  bool put(nlohmann::json v) {
    if (stack_.empty()) root = std::move(v);
    else if (stack_.back().value.is_array()) stack_.back().value.push_back(std::move(v));
    else stack_.back().value[stack_.back().pending_key] = std::move(v);
    return true;
  }
  bool open(nlohmann::json empty) {
    if (stack_.size() >= static_cast<std::size_t>(kMaxDepth))
      throw Error(where_, location(), "", "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    stack_.push_back(Frame{std::move(empty), {}, false, {}});
    return true;
  }
  bool close() {
    nlohmann::json v = std::move(stack_.back().value);
    stack_.pop_back();
    return put(std::move(v));
  }

  std::string_view text_;
  const char* const* cursor_;
  const std::string& where_;
  std::vector<Frame> stack_;
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, const std::string& where) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  const char* cursor = text.data();
  StrictJsonSax sax(text, &cursor, where);
  CountingIterator first{text.data(), &cursor}, last{text.data() + text.size(), &cursor};
  nlohmann::json::sax_parse(first, last, &sax, nlohmann::json::input_format_t::json, true);
  return std::move(sax.root);
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "", "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path, "", "", "cannot read file");
  return std::move(buffer).str();
}

void for_each_line(const std::string& path, const std::string& what,
                   const std::function<void(const std::string& line, const std::string& where)>& each) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "path", path, "cannot open " + what);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    each(line, path + ":" + std::to_string(n));
  }
  if (in.bad()) throw Error(path, "path", path, "cannot read " + what);
}

nlohmann::json read_manifest_file(const std::string& path) {
  const std::string text = read_file_bytes(path);
  const bool json_name = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  const bool looks_json = first != std::string::npos && text[first] == '{';
  return json_name || looks_json ? parse_json_strict(text, path) : parse_yaml(text, path);
}

}  // namespace kindex::evidence
