// Placeholder: filled in by its family's change.
#pragma once
#include "brisk/core/tensor.h"
