// The expression language of catalog/constraints.hpp: a tokenizer, a recursive-descent parser producing a small
// tree, and an evaluator over axes and concrete inputs. Python semantics where they matter: int vs float, floor
// division and modulo, chained comparisons, short-circuit and/or.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <variant>

#include "catalog/constraints.hpp"
#include "core/error.hpp"

namespace kindex::catalog {

namespace {

constexpr size_t kMaxExpressionLength = 4096;
constexpr int kMaxDepth = 400;  // parser recursion levels: about 100 nested parentheses

enum class Op {
  number,
  name,
  call,
  index,
  attribute,
  neg,
  pos,
  not_,
  add,
  sub,
  mul,
  div,
  floordiv,
  mod,
  and_,
  or_,
  compare
};

}  // namespace

struct ExprNode {
  Op op = Op::number;
  bool is_int = true;      // number: integer literal
  int64_t int_value = 0;   // number
  double float_value = 0;  // number
  std::string name;        // name, call (function), attribute (attribute name; called if `called`)
  bool called = false;     // attribute followed by ()
  std::vector<std::shared_ptr<const ExprNode>> args;  // operands; compare: operands with ops in cmp_ops
  std::vector<std::string> cmp_ops;
};

namespace {

using Node = std::shared_ptr<const ExprNode>;

struct Token {
  enum Kind { end, number, name, op } kind = end;
  std::string text;
  size_t pos = 0;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& where, const std::string& field, std::set<std::string>& names)
      : text_(text), where_(where), field_(field), names_(names) {
    tokenize();
  }

  Node parse() {
    Node n = parse_or();
    if (peek().kind != Token::end) fail("unexpected '" + peek().text + "'", peek().pos);
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t pos) const {
    throw Error(where_, field_, std::string(text_), "syntax error at column " + std::to_string(pos + 1) + ": " + what);
  }

  void tokenize() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (c == ' ' || c == '\t') {
        ++i;
        continue;
      }
      Token t;
      t.pos = i;
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        size_t j = i;
        while (j < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '.' ||
                ((text_[j] == '+' || text_[j] == '-') && (text_[j - 1] == 'e' || text_[j - 1] == 'E'))))
          ++j;
        t.kind = Token::number;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_')) ++j;
        t.kind = Token::name;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else {
        static const char* two[] = {"==", "!=", "<=", ">=", "//"};
        t.kind = Token::op;
        for (const char* op : two)
          if (text_.substr(i, 2) == op) t.text = op;
        if (t.text.empty()) {
          if (std::string_view("+-*/%()[].,<>").find(c) == std::string_view::npos)
            fail(std::string("unexpected character '") + c + "'", i);
          t.text = std::string(1, c);
        }
        i += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
    tokens_.push_back(Token{Token::end, "end of expression", text_.size()});
  }

  const Token& peek() const { return tokens_[pos_]; }
  bool accept(const std::string& s) {
    if (peek().kind != Token::number && peek().text == s) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(const std::string& s) {
    if (!accept(s)) fail("expected '" + s + "' but found '" + peek().text + "'", peek().pos);
  }
  // Bounds the recursion so hostile input cannot overflow the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("expression nested too deeply", p.peek().pos);
    }
    ~DepthGuard() { --p.depth_; }
  };

  static Node make(Op op, std::vector<Node> args = {}) {
    auto n = std::make_shared<ExprNode>();
    n->op = op;
    n->args = std::move(args);
    return n;
  }

  // One left-associative precedence level: operands parsed by `operand`, joined by any operator of `ops`.
  struct BinaryOp {
    const char* text;
    Op op;
  };
  Node parse_left_assoc(Node (Parser::*operand)(), std::initializer_list<BinaryOp> ops) {
    Node lhs = (this->*operand)();
    for (;;) {
      const BinaryOp* found = nullptr;
      for (const BinaryOp& o : ops)
        if (accept(o.text)) {
          found = &o;
          break;
        }
      if (!found) return lhs;
      lhs = make(found->op, {lhs, (this->*operand)()});
    }
  }

  Node parse_or() {
    DepthGuard guard(*this);
    return parse_left_assoc(&Parser::parse_and, {{"or", Op::or_}});
  }
  Node parse_and() { return parse_left_assoc(&Parser::parse_not, {{"and", Op::and_}}); }
  Node parse_not() {
    DepthGuard guard(*this);
    if (accept("not")) return make(Op::not_, {parse_not()});
    return parse_compare();
  }
  Node parse_compare() {
    Node first = parse_arith();
    auto n = std::make_shared<ExprNode>();
    n->op = Op::compare;
    n->args.push_back(first);
    for (;;) {
      const std::string& t = peek().text;
      if (peek().kind != Token::op || (t != "==" && t != "!=" && t != "<" && t != "<=" && t != ">" && t != ">=")) break;
      n->cmp_ops.push_back(t);
      ++pos_;
      n->args.push_back(parse_arith());
    }
    if (n->cmp_ops.empty()) return first;
    return n;
  }
  Node parse_arith() { return parse_left_assoc(&Parser::parse_term, {{"+", Op::add}, {"-", Op::sub}}); }
  Node parse_term() {
    return parse_left_assoc(&Parser::parse_unary,
                            {{"*", Op::mul}, {"//", Op::floordiv}, {"/", Op::div}, {"%", Op::mod}});
  }
  Node parse_unary() {
    DepthGuard guard(*this);
    if (accept("-")) return make(Op::neg, {parse_unary()});
    if (accept("+")) return make(Op::pos, {parse_unary()});
    return parse_postfix();
  }
  Node parse_postfix() {
    Node n = parse_primary();
    for (;;) {
      if (accept("[")) {
        Node idx = parse_or();
        expect("]");
        n = make(Op::index, {n, idx});
      } else if (accept(".")) {
        if (peek().kind != Token::name) fail("expected an attribute name after '.'", peek().pos);
        auto a = std::make_shared<ExprNode>();
        a->op = Op::attribute;
        a->name = peek().text;
        a->args.push_back(n);
        ++pos_;
        if (accept("(")) {
          expect(")");
          a->called = true;
        }
        if (a->name != "item" && a->name != "shape" && a->name != "numel")
          fail("unknown attribute '" + a->name + "' (item(), shape, numel())", tokens_[pos_ - 1].pos);
        if ((a->name == "shape") == a->called) fail("'" + a->name + "' used wrongly", tokens_[pos_ - 1].pos);
        n = a;
      } else {
        return n;
      }
    }
  }
  Node parse_primary() {
    DepthGuard guard(*this);
    const Token t = peek();
    if (t.kind == Token::number) {
      ++pos_;
      auto n = std::make_shared<ExprNode>();
      n->op = Op::number;
      const char* b = t.text.c_str();
      char* e = nullptr;
      bool is_float = t.text.find_first_of(".eE") != std::string::npos;
      errno = 0;
      if (is_float) {
        n->is_int = false;
        n->float_value = std::strtod(b, &e);
      } else {
        n->int_value = std::strtoll(b, &e, 10);
      }
      if (e != b + t.text.size() || errno == ERANGE) fail("bad number '" + t.text + "'", t.pos);
      return n;
    }
    if (t.kind == Token::name) {
      ++pos_;
      if (t.text == "and" || t.text == "or" || t.text == "not") fail("unexpected '" + t.text + "'", t.pos);
      if (t.text == "True" || t.text == "False") {
        auto n = std::make_shared<ExprNode>();
        n->int_value = t.text == "True";
        return n;
      }
      if (accept("(")) {
        if (t.text != "len" && t.text != "int" && t.text != "abs" && t.text != "min" && t.text != "max")
          fail("unknown function '" + t.text + "' (len, int, abs, min, max)", t.pos);
        auto n = std::make_shared<ExprNode>();
        n->op = Op::call;
        n->name = t.text;
        if (!accept(")")) {
          do n->args.push_back(parse_or());
          while (accept(","));
          expect(")");
        }
        size_t want_min = (t.text == "min" || t.text == "max") ? 2 : 1;
        size_t want_max = (t.text == "min" || t.text == "max") ? 64 : 1;
        if (n->args.size() < want_min || n->args.size() > want_max)
          fail("wrong number of arguments to " + t.text + "()", t.pos);
        return n;
      }
      auto n = std::make_shared<ExprNode>();
      n->op = Op::name;
      n->name = t.text;
      names_.insert(t.text);
      return n;
    }
    if (accept("(")) {
      Node n = parse_or();
      expect(")");
      return n;
    }
    fail("expected a number, a name or '(' but found '" + t.text + "'", t.pos);
  }

  std::string_view text_;
  const std::string& where_;
  const std::string& field_;
  std::set<std::string>& names_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// A value during evaluation: a Python int or float, a (partly indexed) tensor, or a shape tuple.
struct TensorRef {
  const Tensor* tensor = nullptr;
  std::string name;
  int64_t offset = 0;  // element offset of the indexed sub-tensor
  size_t depth = 0;    // leading dimensions already indexed
};
struct Shape {
  std::vector<int64_t> dims;
};
using Value = std::variant<int64_t, double, TensorRef, Shape>;

class Evaluator {
 public:
  Evaluator(const Expression::Scope& scope, const std::string& where, const std::string& field, const std::string& text,
            bool integer_only)
      : scope_(scope), where_(where), field_(field), text_(text), integer_only_(integer_only) {}

  Value eval(const ExprNode& n) {
    switch (n.op) {
      case Op::number:
        if (n.is_int) return n.int_value;
        if (integer_only_) fail("only integers are allowed here");
        return n.float_value;
      case Op::name:
        return lookup(n.name);
      case Op::call:
        return call(n);
      case Op::index:
        return index(eval(*n.args[0]), eval(*n.args[1]));
      case Op::attribute:
        return attribute(n.name, eval(*n.args[0]));
      case Op::neg: {
        Value v = scalar(eval(*n.args[0]));
        if (auto* i = std::get_if<int64_t>(&v)) {
          if (*i == std::numeric_limits<int64_t>::min()) fail("integer overflow");
          return -*i;
        }
        return -std::get<double>(v);
      }
      case Op::pos:
        return scalar(eval(*n.args[0]));
      case Op::not_:
        return int64_t(!truth(eval(*n.args[0])));
      case Op::and_:
        return int64_t(truth(eval(*n.args[0])) && truth(eval(*n.args[1])));
      case Op::or_:
        return int64_t(truth(eval(*n.args[0])) || truth(eval(*n.args[1])));
      case Op::compare: {
        Value lhs = scalar(eval(*n.args[0]));
        for (size_t k = 0; k < n.cmp_ops.size(); ++k) {
          Value rhs = scalar(eval(*n.args[k + 1]));
          if (!compare(lhs, n.cmp_ops[k], rhs)) return int64_t(0);
          lhs = rhs;
        }
        return int64_t(1);
      }
      default:
        return arithmetic(n.op, scalar(eval(*n.args[0])), scalar(eval(*n.args[1])));
    }
  }

  // A number from a value; 1-element tensors read as their element (as torch's implicit conversion does).
  Value scalar(const Value& v) {
    if (auto* t = std::get_if<TensorRef>(&v)) {
      const auto& dims = t->tensor->shape();
      int64_t count = 1;
      for (size_t i = t->depth; i < dims.size(); ++i) count *= dims[i];
      if (count != 1) fail("'" + t->name + "' is a tensor of shape " + shape_string(remaining(*t)) + ", not a number");
      return element(*t, t->offset);
    }
    if (std::holds_alternative<Shape>(v)) fail("a shape is not a number");
    return v;
  }

  bool truth(const Value& v) {
    Value s = scalar(v);
    if (auto* i = std::get_if<int64_t>(&s)) return *i != 0;
    return std::get<double>(s) != 0.0;
  }

  [[noreturn]] void fail(const std::string& problem) const { throw Error(where_, field_, text_, problem); }

 private:
  static std::vector<int64_t> remaining(const TensorRef& t) {
    const auto& s = t.tensor->shape();
    return std::vector<int64_t>(s.begin() + long(t.depth), s.end());
  }
  static int64_t numel(const std::vector<int64_t>& dims) { return shape_numel(dims); }

  Value element(const TensorRef& t, int64_t offset) {
    DType d = t.tensor->dtype();
    if (integer_only_) fail("tensors cannot appear here");
    if (d == DType::i32) return int64_t(t.tensor->ptr<int32_t>()[offset]);
    if (d == DType::i64) return t.tensor->ptr<int64_t>()[offset];
    if (d == DType::u8 || d == DType::boolean) return int64_t(t.tensor->ptr<uint8_t>()[offset]);
    return t.tensor->get(offset);
  }

  Value lookup(const std::string& name) {
    if (scope_.axes) {
      auto it = scope_.axes->find(name);
      if (it != scope_.axes->end()) return it->second;
    }
    if (scope_.inputs && !integer_only_) {
      auto t = scope_.inputs->tensors.find(name);
      if (t != scope_.inputs->tensors.end()) return TensorRef{&t->second, name, 0, 0};
      auto s = scope_.inputs->scalars.find(name);
      if (s != scope_.inputs->scalars.end()) return s->second;
    }
    fail("unknown name '" + name + "'");
  }

  Value call(const ExprNode& n) {
    if (n.name == "len") {
      Value v = eval(*n.args[0]);
      if (auto* t = std::get_if<TensorRef>(&v)) {
        auto r = remaining(*t);
        if (r.empty()) fail("len() of a 0-d tensor");
        return r[0];
      }
      if (auto* s = std::get_if<Shape>(&v)) return int64_t(s->dims.size());
      fail("len() needs a tensor or a shape");
    }
    if (n.name == "int") {
      Value v = scalar(eval(*n.args[0]));
      if (auto* d = std::get_if<double>(&v)) {
        if (!std::isfinite(*d) || std::fabs(*d) >= 9.2e18) fail("int() of a value out of range");
        return int64_t(*d);
      }
      return v;
    }
    if (n.name == "abs") {
      Value v = scalar(eval(*n.args[0]));
      if (auto* i = std::get_if<int64_t>(&v)) {
        if (*i == std::numeric_limits<int64_t>::min()) fail("integer overflow");
        return *i < 0 ? -*i : *i;
      }
      return std::fabs(std::get<double>(v));
    }
    Value best = scalar(eval(*n.args[0]));  // min / max
    for (size_t k = 1; k < n.args.size(); ++k) {
      Value v = scalar(eval(*n.args[k]));
      if (compare(v, n.name == "min" ? "<" : ">", best)) best = v;
    }
    return best;
  }

  Value index(const Value& base, const Value& idx_value) {
    Value iv = scalar(idx_value);
    if (!std::holds_alternative<int64_t>(iv)) fail("an index must be an integer");
    int64_t i = std::get<int64_t>(iv);
    if (auto* s = std::get_if<Shape>(&base)) {
      int64_t n = int64_t(s->dims.size());
      if (i < -n || i >= n) fail("shape index " + std::to_string(i) + " out of range for " + shape_string(s->dims));
      return s->dims[size_t(i < 0 ? i + n : i)];
    }
    auto* t = std::get_if<TensorRef>(&base);
    if (!t) fail("only tensors and shapes can be indexed");
    auto r = remaining(*t);
    if (r.empty()) fail("'" + t->name + "' is 0-d and cannot be indexed");
    int64_t n = r[0];
    if (i < -n || i >= n)
      fail("index " + std::to_string(i) + " out of range for '" + t->name + "' of length " + std::to_string(n));
    if (i < 0) i += n;
    TensorRef out = *t;
    out.offset += i * numel(std::vector<int64_t>(r.begin() + 1, r.end()));
    out.depth += 1;
    if (out.depth == t->tensor->shape().size()) return element(out, out.offset);
    return out;
  }

  Value attribute(const std::string& attr, const Value& base) {
    if (attr == "item") return scalar(base);
    auto* t = std::get_if<TensorRef>(&base);
    if (!t) {
      if (attr == "numel" && !std::holds_alternative<Shape>(base)) return int64_t(1);
      fail("." + attr + " needs a tensor");
    }
    if (attr == "shape") return Shape{remaining(*t)};
    return numel(remaining(*t));  // numel()
  }

  Value arithmetic(Op op, const Value& a, const Value& b) {
    auto* ai = std::get_if<int64_t>(&a);
    auto* bi = std::get_if<int64_t>(&b);
    if (ai && bi) {
      int64_t x = *ai, y = *bi, r = 0;
      switch (op) {
        case Op::add:
          if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
          return r;
        case Op::sub:
          if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
          return r;
        case Op::mul:
          if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
          return r;
        case Op::div:
          if (y == 0) fail("division by zero");
          if (integer_only_) {
            if (x % y != 0) fail(std::to_string(x) + " / " + std::to_string(y) + " is not an integer");
            return x / y;
          }
          return double(x) / double(y);
        case Op::floordiv:
        case Op::mod: {
          if (y == 0) fail("division by zero");
          if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
          int64_t q = x / y, m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors; C++ truncates
            q -= 1;
            m += y;
          }
          return op == Op::floordiv ? q : m;
        }
        default:
          break;
      }
    }
    if (integer_only_) fail("only integers are allowed here");
    double x = ai ? double(*ai) : std::get<double>(a);
    double y = bi ? double(*bi) : std::get<double>(b);
    switch (op) {
      case Op::add:
        return x + y;
      case Op::sub:
        return x - y;
      case Op::mul:
        return x * y;
      case Op::div:
        if (y == 0) fail("division by zero");
        return x / y;
      case Op::floordiv:
        if (y == 0) fail("division by zero");
        return std::floor(x / y);
      case Op::mod: {
        if (y == 0) fail("division by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return m;
      }
      default:
        fail("internal: bad operator");
    }
  }

  static bool compare(const Value& a, const std::string& op, const Value& b) {
    auto* ai = std::get_if<int64_t>(&a);
    auto* bi = std::get_if<int64_t>(&b);
    int c;
    if (ai && bi) {
      c = *ai < *bi ? -1 : (*ai > *bi ? 1 : 0);
    } else {
      double x = ai ? double(*ai) : std::get<double>(a), y = bi ? double(*bi) : std::get<double>(b);
      if (std::isnan(x) || std::isnan(y)) return op == "!=";
      c = x < y ? -1 : (x > y ? 1 : 0);
    }
    if (op == "==") return c == 0;
    if (op == "!=") return c != 0;
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  const Expression::Scope& scope_;
  const std::string& where_;
  const std::string& field_;
  const std::string& text_;
  bool integer_only_;
};

std::string format_number(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", *d);
    return buf;
  }
  return "?";
}

}  // namespace

Expression Expression::parse(std::string_view text, const std::string& where, const std::string& field) {
  if (text.size() > kMaxExpressionLength)
    throw Error(where, field, std::string(text.substr(0, 64)) + "...",
                "expression longer than " + std::to_string(kMaxExpressionLength) + " characters");
  Expression e;
  e.text_ = std::string(text);
  e.root_ = Parser(text, where, field, e.names_).parse();
  return e;
}

double Expression::evaluate(const Scope& scope, const std::string& where, const std::string& field) const {
  Evaluator ev(scope, where, field, text_, false);
  Value v = ev.scalar(ev.eval(*root_));
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return std::get<double>(v);
}

int64_t Expression::evaluate_integer(const std::map<std::string, int64_t>& axes, const std::string& where,
                                     const std::string& field) const {
  Scope scope{&axes, nullptr};
  Evaluator ev(scope, where, field, text_, true);
  Value v = ev.scalar(ev.eval(*root_));
  return std::get<int64_t>(v);
}

std::string Expression::explain(const Scope& scope, const std::string& where, const std::string& field) const {
  // For a comparison, the evaluated operands joined by their operators ("131 == 130"); else the value.
  Evaluator ev(scope, where, field, text_, false);
  if (root_->op != Op::compare) return format_number(ev.scalar(ev.eval(*root_)));
  std::string s = format_number(ev.scalar(ev.eval(*root_->args[0])));
  for (size_t k = 0; k < root_->cmp_ops.size(); ++k)
    s += " " + root_->cmp_ops[k] + " " + format_number(ev.scalar(ev.eval(*root_->args[k + 1])));
  return s;
}

}  // namespace kindex::catalog
