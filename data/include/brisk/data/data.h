// The data layer: datasets, samplers, the DataLoader, transforms, IDX (MNIST) and
// safetensors files, token data for language models, and the JSON value they share with
// checkpoints.
#pragma once
#include "brisk/data/bpe.h"
#include "brisk/data/dataloader.h"
#include "brisk/data/dataset.h"
#include "brisk/data/mnist.h"
#include "brisk/data/safetensors.h"
#include "brisk/data/safetensors_folder.h"
#include "brisk/data/sampler.h"
#include "brisk/data/tokens.h"
#include "brisk/data/transforms.h"
