#include "runner/execute/input_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "catalog/builtin.hpp"

namespace kindex::runner {
namespace {

bool same(const catalog::Inputs& a, const catalog::Inputs& b) {
  if (a.tensors.size() != b.tensors.size() || a.scalars != b.scalars) return false;
  for (const auto& [name, t] : a.tensors) {
    const Tensor& u = b.tensors.at(name);
    if (t.shape() != u.shape() || std::memcmp(t.data(), u.data(), t.nbytes()) != 0) return false;
  }
  return true;
}

TEST(InputCache, SharesAWorkloadsRoundsAndForgetsThemAtTheNextWorkload) {
  auto problem = catalog::builtin_problem("gqa_paged_decode_h24_kv4_d128_ps64");
  const auto& def = problem.definition;
  const auto &w0 = problem.workloads.at(0), &w3 = problem.workloads.at(3);
  InputCache cache(size_t(1) << 30);
  auto a = cache.get(def, w0, 1), b = cache.get(def, w0, 2);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.get(def, w0, 1), a);  // the same tensors, not a copy
  EXPECT_EQ(cache.get(def, w0, 2), b);
  EXPECT_EQ(cache.hits(), 2);
  EXPECT_TRUE(same(*a, catalog::generate_inputs(def, w0, 1)));  // exactly what generation gives
  EXPECT_FALSE(same(*a, *b));
  cache.get(def, w3, 1);  // another workload: w0's rounds are dropped
  EXPECT_EQ(cache.misses(), 3);
  cache.get(def, w0, 1);
  EXPECT_EQ(cache.misses(), 4);
  EXPECT_TRUE(same(*a, catalog::generate_inputs(def, w0, 1)));  // a caller's inputs outlive their eviction
}

TEST(InputCache, WhatExceedsTheBudgetIsGeneratedEveryTime) {
  auto problem = catalog::builtin_problem("gqa_paged_decode_h24_kv4_d128_ps64");
  InputCache cache(1024);  // smaller than any workload's inputs
  auto a = cache.get(problem.definition, problem.workloads.at(0), 1);
  auto b = cache.get(problem.definition, problem.workloads.at(0), 1);
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_TRUE(same(*a, *b));
  EXPECT_GT(default_input_cache_budget(), size_t(0));
}

}  // namespace
}  // namespace kindex::runner
