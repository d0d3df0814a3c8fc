// The accelerate layer: the Accelerator, launch configuration, host detection and launch
// command building.
#pragma once
#include "brisk/accelerate/accelerator.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/accelerate/launch.h"
#include "brisk/accelerate/yaml.h"
