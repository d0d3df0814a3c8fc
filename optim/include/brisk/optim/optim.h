// The optim layer: optimizers, LR schedules and gradient clipping.
#pragma once
#include "brisk/optim/adam.h"
#include "brisk/optim/clip.h"
#include "brisk/optim/lr_scheduler.h"
#include "brisk/optim/optimizer.h"
#include "brisk/optim/sgd.h"
