// The umbrella header: `#include <brisk/brisk.h>` gives the whole public API.
#pragma once
// Listed layer by layer, bottom up, as the libraries depend on each other.
// clang-format off
#include "brisk/core/allocator.h"
#include "brisk/core/cli.h"
#include "brisk/core/device.h"
#include "brisk/core/dtype.h"
#include "brisk/core/error.h"
#include "brisk/core/half.h"
#include "brisk/core/profiler.h"
#include "brisk/core/progress.h"
#include "brisk/core/rng.h"
#include "brisk/core/shape.h"
#include "brisk/core/storage.h"
#include "brisk/core/tensor.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/settings.h"
#include "brisk/kernels/threads.h"
#include "brisk/autograd/autograd.h"
#include "brisk/nn/nn.h"
#include "brisk/optim/optim.h"
#include "brisk/amp/amp.h"
#include "brisk/data/data.h"
#include "brisk/models/models.h"
#include "brisk/dist/dist.h"
#include "brisk/accelerate/accelerate.h"
#include "brisk/version.h"
// clang-format on
