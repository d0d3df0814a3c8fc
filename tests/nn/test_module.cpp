// nn::Module behaviour: registration order, dotted names, tied weights, strict loading,
// modes, dtype moves, zero_grad, apply, and the three kinds of hooks.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>

using namespace brisk;

namespace {

// y = x * w + b, elementwise, so the tests need no other layer.
struct Scale : nn::Module {
  Tensor w, b;
  explicit Scale(int64_t n) {
    w = register_parameter("weight", ones({n}));
    b = register_parameter("bias", zeros({n}));
  }
  Tensor forward(const Tensor& x) override { return x * w + b; }
};

struct Net : nn::Module {
  Scale first{3}, second{3};
  Net() {
    register_modules({{"first", first}, {"second", second}});
    register_buffer("steps", zeros({1}, {.dtype = DType::I64}));
    register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return second(relu(first(x))); }
};

std::vector<std::string> names(const nn::NamedTensors& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST(Module, NamedParametersFollowRegistrationOrderWithDottedPaths) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"first.weight", "first.bias", "second.weight", "second.bias"}));
  EXPECT_EQ(net.num_parameters(), 12);
  EXPECT_TRUE(net.get("second.weight").requires_grad());
  EXPECT_THROW(net.get("third.weight"), Error);
}

TEST(Module, StateDictHoldsParametersThenPersistentBuffers) {
  Net net;
  EXPECT_EQ(names(net.state_dict()),
            (std::vector<std::string>{"first.weight", "first.bias", "second.weight", "second.bias", "steps"}));
}

TEST(Module, NamesWithDotsOrDuplicatesAreRejected) {
  Scale s(2);
  EXPECT_THROW(s.register_parameter("a.b", zeros({1})), Error);
  EXPECT_THROW(s.register_parameter("weight", zeros({1})), Error);
  EXPECT_THROW(s.register_buffer("", zeros({1})), Error);
}

TEST(Module, TiedWeightsAppearOnceInParametersButUnderEveryNameInStateDict) {
  Net net;
  net.second.w = net.first.w;  // tie
  net.second.set_tensor("weight", net.first.w);
  EXPECT_EQ(net.parameters().size(), 3u);
  EXPECT_EQ(net.state_dict().size(), 5u);
  EXPECT_TRUE(net.get("second.weight").is_same(net.get("first.weight")));
}

TEST(Module, LoadStateDictCopiesValuesInPlace) {
  Net a, b;
  {
    NoGradGuard ng;
    fill_(a.first.w, 2.0);
  }
  Tensor handle = b.first.w;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(handle.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(Module, StrictLoadListsMissingUnexpectedAndMismatchedKeys) {
  Net net;
  nn::NamedTensors sd = net.state_dict();
  sd.erase(sd.begin());                         // first.weight missing
  sd.emplace_back("extra.weight", zeros({1}));  // unexpected
  sd[0].second = zeros({4});                    // first.bias wrong shape
  try {
    net.load_state_dict(sd);
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("missing keys: [first.weight]"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected keys: [extra.weight]"), std::string::npos) << m;
    EXPECT_NE(m.find("first.bias: expected [3], got [4]"), std::string::npos) << m;
  }
  nn::LoadResult r = net.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, std::vector<std::string>{"first.weight"});
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(r.shape_mismatches.size(), 1u);
}

TEST(Module, LoadStateDictConvertsBetweenFloatingTypes) {
  Net net;
  nn::NamedTensors sd = net.state_dict();
  sd[0].second = full({3}, 1.5, {.dtype = DType::F64});    // first.weight
  sd[1].second = full({3}, 0.25, {.dtype = DType::BF16});  // first.bias
  net.load_state_dict(sd);
  EXPECT_EQ(net.first.w.dtype(), DType::F32);
  EXPECT_EQ(net.first.w.to_vector<float>(), (std::vector<float>{1.5, 1.5, 1.5}));
  EXPECT_EQ(net.first.b.to_vector<float>(), (std::vector<float>{0.25, 0.25, 0.25}));
}

// A NaN must never flow through an undefined float -> integer cast, nor an integer into a float
// parameter silently: only floating types convert into one another, strict or not.
TEST(Module, LoadStateDictRefusesConversionsInvolvingNonFloatingTypes) {
  auto error_of = [](Net& net, const nn::NamedTensors& sd, bool strict) -> std::string {
    try {
      net.load_state_dict(sd, strict);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  Net net;
  nn::NamedTensors sd = net.state_dict();
  sd[4].second = full({1}, std::nan(""));  // steps: I64 buffer, F32 in the file
  for (bool strict : {true, false}) {
    const std::string m = error_of(net, sd, strict);
    EXPECT_NE(m.find("\"steps\""), std::string::npos) << m;
    EXPECT_NE(m.find("I64"), std::string::npos) << m;
    EXPECT_NE(m.find("F32"), std::string::npos) << m;
  }
  EXPECT_EQ(net.get("steps").to_vector<int64_t>(), std::vector<int64_t>{0});
  sd = net.state_dict();
  sd[0].second = full({3}, 2, {.dtype = DType::I64});  // first.weight: F32 parameter, I64 given
  std::string m = error_of(net, sd, true);
  EXPECT_NE(m.find("\"first.weight\" is F32 but the state dict holds I64"), std::string::npos) << m;
  sd = net.state_dict();
  sd[0].second = full({3}, 1, {.dtype = DType::Bool});
  m = error_of(net, sd, false);
  EXPECT_NE(m.find("\"first.weight\" is F32 but the state dict holds BOOL"), std::string::npos) << m;
  EXPECT_EQ(net.first.w.to_vector<float>(), (std::vector<float>{1, 1, 1}));  // nothing loaded
}

TEST(Module, TrainAndEvalRecurse) {
  Net net;
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.first.is_training());
  net.train();
  EXPECT_TRUE(net.second.is_training());
}

TEST(Module, ToDtypeCastsFloatingTensorsInPlaceAndKeepsHandles) {
  Net net;
  Tensor handle = net.first.w;
  net.to(DType::F64);
  EXPECT_EQ(handle.dtype(), DType::F64);
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_EQ(net.get("steps").dtype(), DType::I64);  // integer buffers stay
  Tensor y = net(ones({3}, {.dtype = DType::F64}));
  EXPECT_EQ(y.dtype(), DType::F64);
}

TEST(Module, ZeroGradSetsToNoneOrZeroes) {
  Net net;
  net(ones({3})).sum().backward();
  ASSERT_TRUE(net.first.w.grad().defined());
  net.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(net.first.w.grad().to_vector<float>(), (std::vector<float>{0, 0, 0}));
  net.zero_grad();
  EXPECT_FALSE(net.first.w.grad().defined());
}

TEST(Module, ApplyVisitsChildrenBeforeParent) {
  Net net;
  std::vector<std::string> seen;
  net.apply([&](nn::Module& m) { seen.push_back(m.name()); });
  EXPECT_EQ(seen, (std::vector<std::string>{"Scale", "Scale", "Net"}));
}

TEST(Module, ForwardHooksSeeInputsAndOutputs) {
  Net net;
  std::vector<std::string> events;
  net.first.register_forward_pre_hook(
      [&](nn::Module&, const Tensor& x) { events.push_back("pre " + std::to_string(x.numel())); });
  net.first.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& y) {
    events.push_back("post " + std::to_string(y.sum().item<float>()));
  });
  net(full({3}, 2.0));
  EXPECT_EQ(events, (std::vector<std::string>{"pre 3", "post 6.000000"}));
}

TEST(Module, BackwardHookSeesTheGradientOfTheOutput) {
  Net net;
  std::vector<float> seen;
  net.second.register_backward_hook([&](nn::Module&, const Tensor& g) { seen = g.to_vector<float>(); });
  (net(ones({3})) * 5.0).sum().backward();
  EXPECT_EQ(seen, (std::vector<float>{5, 5, 5}));
  EXPECT_EQ(net.first.w.grad().to_vector<float>(), (std::vector<float>{5, 5, 5}));
}

TEST(Module, ParametersAreCountedAsParameterMemory) {
  int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::Parameters)];
  {
    Scale s(1000);
    EXPECT_EQ(memory_stats().current[static_cast<int>(MemoryCategory::Parameters)] - before, 2 * 1000 * 4);
  }
  EXPECT_EQ(memory_stats().current[static_cast<int>(MemoryCategory::Parameters)], before);
}

TEST(Module, TiedWeightsSaveOnceAndLoadBackTied) {
  Net net;
  net.second.set_tensor("weight", net.first.w);
  nn::NamedTensors sd = nn::remove_tied_duplicates(net.state_dict());
  EXPECT_EQ(names(sd), (std::vector<std::string>{"first.weight", "first.bias", "second.bias", "steps"}));
  EXPECT_THROW(data::safetensors_bytes(net.state_dict()), Error);  // two names, one tensor
  std::string bytes = data::safetensors_bytes(sd);
  Net other;
  other.second.set_tensor("weight", other.first.w);
  {
    NoGradGuard ng;
    fill_(net.first.w, 3.0);
  }
  other.load_state_dict(
      data::parse_safetensors(data::safetensors_bytes(nn::remove_tied_duplicates(net.state_dict()))).tensors);
  EXPECT_EQ(other.get("second.weight").to_vector<float>(), (std::vector<float>{3, 3, 3}));
  EXPECT_TRUE(other.get("second.weight").is_same(other.get("first.weight")));
  (void)bytes;
}
