// Everything in the autograd layer: grad mode, the graph and engine, custom functions, ops.
#pragma once
#include "brisk/autograd/checkpoint.h"
#include "brisk/autograd/engine.h"
#include "brisk/autograd/function.h"
#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_elementwise.h"
#include "brisk/autograd/ops_index.h"
#include "brisk/autograd/ops_linalg.h"
#include "brisk/autograd/ops_loss.h"
#include "brisk/autograd/ops_nn.h"
#include "brisk/autograd/ops_reduce.h"
#include "brisk/autograd/ops_shape.h"
