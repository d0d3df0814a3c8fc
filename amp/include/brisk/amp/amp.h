// Mixed precision: the autocast guard and the GradScaler.
#pragma once
#include "brisk/amp/autocast.h"
#include "brisk/amp/grad_scaler.h"
