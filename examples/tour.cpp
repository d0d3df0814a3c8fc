// tour: the demonstrations of the guided tour (docs/tour/): each subcommand prints what one
// chapter explains, from the library itself, so the chapters' outputs stay true (the `docs` test
// label runs them).
//   tour views | autograd | dispatch | amp | sampling
#include <brisk/brisk.h>
#include <brisk/kernels/linalg.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

using namespace brisk;

namespace {

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void describe(const char* name, const Tensor& t) {
  std::printf("%-12s sizes %-10s strides %-10s offset %lld  contiguous %-3s storage %p  version %u\n", name,
              shape_text(t.sizes()).c_str(), shape_text(t.strides()).c_str(), static_cast<long long>(t.offset()),
              t.is_contiguous() ? "yes" : "no", static_cast<const void*>(t.storage().get()), t.version());
}

// Chapter 1: a tensor is (storage, sizes, strides, offset); views share the storage.
int views() {
  Tensor a = arange(12, {.dtype = DType::F32}).reshape({3, 4});
  Tensor t = a.transpose(0, 1);  // a view: strides swapped, no copy
  Tensor row = a.select(0, 1);   // a view: offset 4
  Tensor c = t.contiguous();     // a copy: new storage
  describe("a", a);
  describe("a.t()", t);
  describe("a[1]", row);
  describe("t.contiguous", c);
  row.fill_(-1.0);  // writes through the view into a's storage, bumps the shared version
  std::printf("after a[1].fill_(-1): a = %s\n", to_string(a).c_str());
  describe("a", a);
  return 0;
}

// Chapter 2: ops record nodes; backward runs them in reverse creation order.
void print_graph(const autograd::Node* n, int depth, std::vector<const autograd::Node*>& seen) {
  for (const autograd::Node* s : seen)
    if (s == n) return;
  seen.push_back(n);
  std::printf("%*s%s\n", 2 * depth, "", n->name.c_str());
  for (const autograd::Edge& e : n->next)
    if (e.node) print_graph(e.node.get(), depth + 1, seen);
}

int autograd_demo() {
  Tensor x = tensor<double>({1.0, 2.0, 3.0}).requires_grad_();
  Tensor w = tensor<double>({0.5, -1.0, 2.0}).requires_grad_();
  Tensor y = (x * w).exp().sum();  // y = sum(exp(x * w))
  std::printf("y = sum(exp(x * w)) = %.6f\nthe graph from y (each node, then the nodes of its inputs):\n",
              y.item<double>());
  std::vector<const autograd::Node*> seen;
  print_graph(autograd::meta(y)->grad_fn.get(), 1, seen);
  y.backward();
  std::printf("dy/dx = w * exp(x * w) = %s\ndy/dw = x * exp(x * w) = %s\n", to_string(x.grad()).c_str(),
              to_string(w.grad()).c_str());
  // exp saved its output for backward; changing it in place makes a second backward refuse.
  Tensor e = (x * w).exp();
  Tensor z = e.sum();
  {
    NoGradGuard ng;
    e.mul_(2.0);
  }
  try {
    z.backward();
  } catch (const Error& err) {
    std::printf("after an in-place change of a saved tensor, backward refuses:\n  %s\n", err.message().c_str());
  }
  return 0;
}

// Chapter 3: one op, many dtypes and devices; the kernel layer dispatches.
int dispatch() {
  const Tensor a = tensor<float>({1.0f / 3.0f, 1000.5f, -2.25f});
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    Tensor x = a.to(dt);
    Tensor y = x * x + 1.0;
    std::printf("%-5s x*x+1 = %s\n", dtype_name(dt), to_string(y.to(DType::F64)).c_str());
  }
  std::printf("matrix products on the CPU: %s\n", kernels::cpu_gemm_description().c_str());
  std::printf("CUDA devices visible to this build: %d%s\n", cuda::device_count(),
              cuda::device_count() ? "" : " (every op above ran on the CPU kernels)");
  return 0;
}

// Chapter 4: autocast picks a dtype per op; the GradScaler skips steps that overflow.
int amp_demo() {
  nn::Linear lin(4, 3);
  Tensor x = randn({2, 4});
  {
    amp::Autocast ac(DType::BF16);
    Tensor h = lin(x);         // a "lower precision" op: runs in bf16
    Tensor p = softmax(h, 1);  // an "fp32" op: runs in f32
    std::printf("under autocast(bf16): linear -> %s, softmax -> %s, the weight stays %s\n", dtype_name(h.dtype()),
                dtype_name(p.dtype()), dtype_name(lin.weight.dtype()));
  }
  optim::SGD opt(lin.parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 65536.0, .growth_interval = 2});
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    // Step 1 makes an inf gradient on purpose (as an fp16 overflow would).
    Tensor loss = (lin(x) * (step == 1 ? std::numeric_limits<double>::infinity() : 1.0)).sum();
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    std::printf("step %d: %s, scale now %g\n", step, stepped ? "optimizer stepped" : "inf found, step skipped",
                scaler.get_scale());
  }
  return 0;
}

// Chapter 7: how the Accelerator shards a loader's batches across ranks.
int sampling() {
  data::BatchPlan plan;  // 10 samples in batches of 3: [0 1 2] [3 4 5] [6 7 8] [9]
  for (int64_t i = 0; i < 10; i += 3) {
    plan.emplace_back();
    for (int64_t j = i; j < std::min<int64_t>(i + 3, 10); ++j) plan.back().push_back(j);
  }
  auto show = [&](const char* title, bool split, bool even, bool drop_last) {
    std::printf("%s\n", title);
    for (int r = 0; r < 2; ++r) {
      accelerate::ShardedPlan s = accelerate::shard_batch_plan(plan, 3, 2, r, split, even, drop_last);
      std::printf("  rank %d:", r);
      for (const auto& b : s.batches) {
        std::printf(" [");
        for (size_t k = 0; k < b.size(); ++k) std::printf(k ? " %lld" : "%lld", static_cast<long long>(b[k]));
        std::printf("]");
      }
      if (s.last_round_size > 0)
        std::printf("   (last round: %lld of %lld samples real)", static_cast<long long>(s.last_round_real),
                    static_cast<long long>(s.last_round_size));
      std::printf("\n");
    }
  };
  std::printf("10 samples, batches of 3: [0 1 2] [3 4 5] [6 7 8] [9], on 2 ranks\n");
  show("even_batches (the default): rank r takes batches r, r+2, ...; the short end is filled from the start", false,
       true, false);
  show("even_batches off: ranks may get different numbers of samples", false, false, false);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "views") return views();
  if (what == "autograd") return autograd_demo();
  if (what == "dispatch") return dispatch();
  if (what == "amp") return amp_demo();
  if (what == "sampling") return sampling();
  std::fprintf(what == "--help" || what == "-h" ? stdout : stderr,
               "usage: tour views | autograd | dispatch | amp | sampling\n"
               "The demonstrations of the guided tour in docs/tour/: each prints what its chapter explains.\n");
  return what == "--help" || what == "-h" ? 0 : 2;
}
