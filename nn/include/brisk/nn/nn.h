// The nn layer: Module, layers, containers, init, and the functional losses.
#pragma once
#include "brisk/nn/attention.h"
#include "brisk/nn/containers.h"
#include "brisk/nn/conv.h"
#include "brisk/nn/functional.h"
#include "brisk/nn/init.h"
#include "brisk/nn/layers.h"
#include "brisk/nn/module.h"
#include "brisk/nn/multihead_attention.h"
#include "brisk/nn/normalization.h"
