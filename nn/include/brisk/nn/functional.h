// nn-flavoured names for the losses and functional ops (nn::cross_entropy(logits, y) as in
// PyTorch's torch.nn.functional); the ops themselves live in autograd.
#pragma once
#include "brisk/autograd/ops_linalg.h"
#include "brisk/autograd/ops_loss.h"
#include "brisk/autograd/ops_nn.h"

namespace brisk::nn {
using brisk::binary_cross_entropy_with_logits;
using brisk::cross_entropy;
using brisk::CrossEntropyOptions;
using brisk::gelu_mlp;
using brisk::l1_loss;
using brisk::mse_loss;
using brisk::nll_loss;
}  // namespace brisk::nn
