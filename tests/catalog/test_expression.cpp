#include <gtest/gtest.h>

#include "catalog/constraints.hpp"
#include "helpers.hpp"

namespace kindex::catalog {
namespace {

double eval(const std::string& text, const std::map<std::string, int64_t>& axes = {}, const Inputs* inputs = nullptr) {
  return Expression::parse(text, "test", "expr").evaluate({&axes, inputs}, "test", "expr");
}

TEST(Expression, ArithmeticFollowsPython) {
  EXPECT_EQ(eval("2 + 3 * 4"), 14);
  EXPECT_EQ(eval("(2 + 3) * 4"), 20);
  EXPECT_EQ(eval("7 // 2"), 3);
  EXPECT_EQ(eval("-7 // 2"), -4);  // floors, as Python does
  EXPECT_EQ(eval("-7 % 3"), 2);
  EXPECT_EQ(eval("7 % -3"), -2);
  EXPECT_DOUBLE_EQ(eval("7 / 2"), 3.5);
  EXPECT_DOUBLE_EQ(eval("1.5e1 - 0.5"), 14.5);
  EXPECT_EQ(eval("--3"), 3);
  EXPECT_EQ(eval("max(2, 9, 4) - min(5, 3)"), 6);
  EXPECT_EQ(eval("abs(-4) + int(2.9)"), 6);
}

TEST(Expression, ComparisonsAndLogic) {
  EXPECT_EQ(eval("1 < 2 < 3"), 1);
  EXPECT_EQ(eval("1 < 3 < 2"), 0);  // chained: both must hold
  EXPECT_EQ(eval("1 == 1 and 2 != 2"), 0);
  EXPECT_EQ(eval("1 == 2 or not 0"), 1);
  EXPECT_EQ(eval("True and not False"), 1);
  EXPECT_EQ(eval("2 >= 2 and 3 <= 2"), 0);
}

TEST(Expression, AxesAndTensors) {
  std::map<std::string, int64_t> axes = {{"batch_size", 3}, {"len_indptr", 4}, {"num_kv_indices", 9}};
  Inputs in;
  Tensor indptr(DType::i32, {4});
  int32_t values[] = {0, 2, 5, 9};
  for (int i = 0; i < 4; ++i) indptr.ptr<int32_t>()[i] = values[i];
  in.tensors["kv_indptr"] = indptr;
  in.tensors["grid"] = Tensor(DType::f32, {2, 3});
  in.tensors["grid"].set(5, 7.5);
  in.scalars["sm_scale"] = 0.25;
  EXPECT_EQ(eval("len_indptr == batch_size + 1", axes), 1);
  EXPECT_EQ(eval("num_kv_indices == kv_indptr[-1].item()", axes, &in), 1);
  EXPECT_EQ(eval("kv_indptr[1] + kv_indptr[-2]", axes, &in), 7);
  EXPECT_EQ(eval("kv_indptr.shape[0] == len(kv_indptr)", axes, &in), 1);
  EXPECT_EQ(eval("kv_indptr.numel()", axes, &in), 4);
  EXPECT_DOUBLE_EQ(eval("grid[1][2]", axes, &in), 7.5);
  EXPECT_EQ(eval("grid.shape[1] + len(grid[0])", axes, &in), 6);
  EXPECT_DOUBLE_EQ(eval("sm_scale * 4", axes, &in), 1.0);
}

TEST(Expression, IntegerEvaluationForAxes) {
  auto e = Expression::parse("num_attention_heads * head_dim", "def.json", "axes.q_proj_size.expression");
  EXPECT_EQ(e.evaluate_integer({{"num_attention_heads", 32}, {"head_dim", 128}}, "def.json", "x"), 4096);
  EXPECT_EQ(e.names(), (std::set<std::string>{"head_dim", "num_attention_heads"}));
  EXPECT_EQ(Expression::parse("a / 4", "w", "f").evaluate_integer({{"a", 12}}, "w", "f"), 3);
  EXPECT_KINDEX_ERROR(Expression::parse("a / 5", "w", "f").evaluate_integer({{"a", 12}}, "w", "f"), "w", "f", "a / 5");
  EXPECT_KINDEX_ERROR(Expression::parse("a * 1.5", "w", "f").evaluate_integer({{"a", 2}}, "w", "f"), "w", "f", "");
}

TEST(Expression, ExplainShowsOperands) {
  std::map<std::string, int64_t> axes = {{"batch_size", 3}, {"len_indptr", 5}};
  auto e = Expression::parse("len_indptr == batch_size + 1", "w", "f");
  EXPECT_EQ(e.explain({&axes, nullptr}, "w", "f"), "5 == 4");
}

TEST(Expression, BadInputGivesErrors) {
  std::map<std::string, int64_t> axes = {{"a", 1}};
  Inputs in;
  in.tensors["t"] = Tensor(DType::i32, {2});
  for (const char* bad : {"1 +", "(1", "1 2", "a..b", "a[1", "$", "foo(1)", "a.bogus()", "and 1", "a.shape()", "",
                          "len(1, 2)", "1e999999"})
    EXPECT_KINDEX_ERROR(Expression::parse(bad, "defs.json", "constraints[0]"), "defs.json", "constraints[0]", bad);
  EXPECT_KINDEX_ERROR(eval("missing + 1", axes), "test", "expr", "missing");
  EXPECT_KINDEX_ERROR(eval("t[2]", axes, &in), "test", "expr", "t[2]");
  EXPECT_KINDEX_ERROR(eval("t[-3]", axes, &in), "test", "expr", "");
  EXPECT_KINDEX_ERROR(eval("t + 1", axes, &in), "test", "expr", "");  // a 2-element tensor is not a number
  EXPECT_KINDEX_ERROR(eval("1 // 0"), "test", "expr", "");
  EXPECT_KINDEX_ERROR(eval("1 % 0"), "test", "expr", "");
  EXPECT_KINDEX_ERROR(eval("9223372036854775807 + 1"), "test", "expr", "");
  EXPECT_KINDEX_ERROR(eval("-9223372036854775807 - 2"), "test", "expr", "");
  EXPECT_KINDEX_ERROR(eval("a[0]", axes), "test", "expr", "");
  // Deep nesting is refused, not a stack overflow.
  std::string deep(1000, '(');
  deep += "1" + std::string(1000, ')');
  EXPECT_KINDEX_ERROR(Expression::parse(deep, "w", "f"), "w", "f", "");
  std::string minus(3000, '-');
  EXPECT_KINDEX_ERROR(Expression::parse(minus + "1", "w", "f"), "w", "f", "");
}

}  // namespace
}  // namespace kindex::catalog
