// Reference models shared by examples, tests, benchmarks and the CLI.
#pragma once
#include "brisk/models/bert.h"
#include "brisk/models/fashion_cnn.h"
#include "brisk/models/gpt2.h"
#include "brisk/models/pretrained.h"
