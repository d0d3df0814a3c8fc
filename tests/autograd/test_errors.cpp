// Bad input throws brisk::Error whose message names the op and the offending shapes or values;
// nothing crashes. Each case: the call, and fragments its message must contain.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <functional>

using namespace brisk;

namespace {

struct ErrorCase {
  const char* name;
  std::function<void()> call;
  std::vector<std::string> must_mention;
};

void expect_error(const ErrorCase& c) {
  try {
    c.call();
    ADD_FAILURE() << c.name << ": no exception";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& frag : c.must_mention)
      EXPECT_NE(msg.find(frag), std::string::npos) << c.name << ": message '" << msg << "' lacks '" << frag << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.name << ": threw a non-brisk exception: " << e.what();
  }
}

}  // namespace

TEST(Errors, CoreAndElementwiseBadInputNamesOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5}), i = zeros({3}, {.dtype = DType::I64});
  std::vector<ErrorCase> cases = {
      {"bad broadcast", [&] { (void)(a + b); }, {"add", "[2, 3]", "[4, 5]"}},
      {"negative size",
       [] {
         (void)zeros({2, -1});
       },
       {"negative size", "-1"}},
      {"view incompatible", [&] { (void)a.transpose(0, 1).view({6}); }, {"view", "reshape"}},
      {"view wrong numel",
       [&] {
         (void)a.view({4, 2});
       },
       {"view", "[4, 2]", "6"}},
      {"reshape two -1",
       [&] {
         (void)a.reshape({-1, -1});
       },
       {"reshape", "-1"}},
      {"dim out of range", [&] { (void)a.transpose(0, 2); }, {"transpose", "dim 2", "2 dims"}},
      {"permute wrong count", [&] { (void)a.permute({0}); }, {"permute", "[2, 3]"}},
      {"permute repeated",
       [&] {
         (void)a.permute({1, 1});
       },
       {"permute", "repeated"}},
      {"narrow past end", [&] { (void)a.narrow(1, 2, 2); }, {"narrow", "exceeds", "3"}},
      {"select out of range", [&] { (void)a.select(0, 5); }, {"select", "index 5", "size 2"}},
      {"expand incompatible",
       [&] {
         (void)a.expand({2, 4});
       },
       {"expand", "[2, 3]", "[2, 4]"}},
      {"item on many", [&] { (void)a.item<float>(); }, {"item", "[2, 3]"}},
      {"data dtype", [&] { (void)a.data<double>(); }, {"data<f64>", "f32"}},
      {"from_vector size",
       [] {
         (void)from_vector<float>({1, 2, 3}, {2, 2});
       },
       {"from_vector", "3", "[2, 2]"}},
      {"unknown dtype", [] { (void)dtype_from_name("float8"); }, {"dtype", "float8"}},
      {"unknown device", [] { (void)Device::parse("tpu"); }, {"Device", "tpu"}},
      {"cuda without cuda", [] { (void)empty({2}, DType::F32, cuda_device(0)); }, {"cuda"}},
      {"backward non-scalar",
       [&] {
         Tensor x = ones({2});
         x.requires_grad_();
         (x * 2.0).backward();
       },
       {"backward", "scalar", "[2]"}},
      {"backward no grad", [&] { a.sum().backward(); }, {"backward", "requires_grad"}},
      {"backward wrong grad shape",
       [&] {
         Tensor x = ones({2});
         x.requires_grad_();
         (x * 2.0).backward(ones({3}));
       },
       {"backward", "[3]", "[2]"}},
      {"requires_grad on int",
       [&] {
         Tensor t = i;
         t.requires_grad_();
       },
       {"requires_grad_", "i64"}},
      {"hook on non-leaf",
       [&] {
         Tensor x = ones({2});
         x.requires_grad_();
         (x * 2.0).register_hook([](const Tensor&) {});
       },
       {"register_hook", "not a leaf"}},
      {"set_grad wrong shape", [&] { a.set_grad(ones({3})); }, {"set_grad", "[3]", "[2, 3]"}},
      {"gelu approximate",
       [&] { (void)gelu(a, parse_enum<GeluApproximation>("fast", "gelu: approximate")); },
       {"gelu", "'fast'", "none, tanh"}},
      {"clamp min > max", [&] { (void)clamp(a, 2.0, 1.0); }, {"clamp", "2", "1"}},
      {"where cond dtype", [&] { (void)where(a, a, a); }, {"where", "f32"}},
      {"arange bad step", [] { (void)arange(0.0, 5.0, 0.0); }, {"arange", "step"}},
      {"arange inconsistent", [] { (void)arange(5.0, 0.0, 1.0); }, {"arange", "inconsistent"}},
      {"randint empty range", [] { (void)randint(3, 3, {2}); }, {"randint", "3"}},
      {"normal negative std", [&] { normal_(a, 0.0, -1.0); }, {"normal_", "-1"}},
      {"undefined tensor",
       [] {
         Tensor t;
         (void)t.sizes();
       },
       {"undefined"}},
      {"in-place on leaf",
       [] {
         Tensor x = ones({2});
         x.requires_grad_();
         add_(x, ones({2}));
       },
       {"add_", "requires grad", "[2]"}},
      {"add_ into smaller", [&] { kernels::add_(zeros({3}), a); }, {"add_", "[2, 3]", "[3]"}},
      {"integer exp of bool", [] { (void)exp(from_vector<bool>({true}, {1})); }, {"exp", "bool"}},
      {"int division",
       [] { (void)kernels::unary(kernels::UnaryOp::Sqrt, from_vector<bool>({true}, {1})); },
       {"sqrt", "bool"}},
  };
  for (const auto& c : cases) expect_error(c);
}
