// Reference models shared by examples, tests, benchmarks and the CLI.
#pragma once
#include "brisk/models/fashion_cnn.h"
#include "brisk/models/gpt2.h"
