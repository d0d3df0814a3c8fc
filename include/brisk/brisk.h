// The umbrella header: `#include <brisk/brisk.h>` gives the whole public API.
#pragma once
#include "brisk/core/allocator.h"
#include "brisk/core/device.h"
#include "brisk/core/dtype.h"
#include "brisk/core/error.h"
#include "brisk/core/half.h"
#include "brisk/core/rng.h"
#include "brisk/core/shape.h"
#include "brisk/core/storage.h"
#include "brisk/core/tensor.h"
#include "brisk/kernels/factory.h"
#include "brisk/autograd/autograd.h"
#include "brisk/version.h"
