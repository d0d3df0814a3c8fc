// The environment variables `brisk launch` sets in every process it starts (and forwards to
// other hosts with mpirun's `-x`). A program's Accelerator reads them: what the program sets in
// code wins, then these, then the defaults (docs/accelerator-options.md). Also the exit status by
// which a preempted program tells the launcher that it saved and stopped.
#pragma once

namespace brisk::accelerate::env {

// "1" in every process started by `brisk launch` (also with -n 1, where no mpirun is used).
inline constexpr const char* kLaunched = "BRISK_LAUNCHED";
// "no", "fp16" or "bf16": --mixed_precision / the config's mixed_precision.
inline constexpr const char* kMixedPrecision = "BRISK_MIXED_PRECISION";
// "none", "zero1", "zero2" or "zero3": --sharding / the config's sharding (docs/sharding.md).
inline constexpr const char* kSharding = "BRISK_SHARDING";
// "1" to run on the CPU even where GPUs are present: --cpu / the config's use_cpu.
inline constexpr const char* kCpu = "BRISK_CPU";
// Seconds a collective may take before it fails (default 600): --timeout / the config's timeout.
inline constexpr const char* kTimeoutSeconds = "BRISK_TIMEOUT_SECONDS";
// "1": ranks compare each collective's signature before running it: --debug / the config's debug.
inline constexpr const char* kDebug = "BRISK_DEBUG";
// The number of machines the job spans: --num_machines / the config's num_machines.
inline constexpr const char* kNumMachines = "BRISK_NUM_MACHINES";
// Read by the Accelerator only (set them yourself, or through `brisk launch`'s environment
// forwarding): gradient_accumulation_steps, seed, project_dir, bucket_cap_mb and
// find_unused_parameters ("1"/"0").
inline constexpr const char* kGradientAccumulationSteps = "BRISK_GRADIENT_ACCUMULATION_STEPS";
inline constexpr const char* kSeed = "BRISK_SEED";
inline constexpr const char* kProjectDir = "BRISK_PROJECT_DIR";
inline constexpr const char* kBucketCapMb = "BRISK_BUCKET_CAP_MB";
inline constexpr const char* kFindUnusedParameters = "BRISK_FIND_UNUSED_PARAMETERS";
// Booleans (any of 1/0, true/false, yes/no, on/off, in any case): the Accelerator's nan_watch and
// deterministic options.
inline constexpr const char* kNanWatch = "BRISK_NAN_WATCH";
inline constexpr const char* kDeterministic = "BRISK_DETERMINISTIC";
// A boolean: the Accelerator's async_save (save_state writes its files in the background).
inline constexpr const char* kAsyncSave = "BRISK_ASYNC_SAVE";
// The profiler: a boolean, or a file for the table (read by core's profiler itself; the
// Accelerator's `profile` option overrides it).
inline constexpr const char* kProfile = "BRISK_PROFILE";
// The config file the launch read (absent when none was found).
inline constexpr const char* kConfigFile = "BRISK_CONFIG_FILE";
// With --max-restarts: "0" on the job's first attempt, k when the launcher starts it again for the
// k-th time after a failure (torchrun's TORCHELASTIC_RESTART_COUNT). restart_count() reads it.
inline constexpr const char* kRestartCount = "BRISK_RESTART_COUNT";

// Besides these, `brisk launch` forwards every BRISK_* variable already in its environment, sets
// CUDA_VISIBLE_DEVICES from --gpu_ids, and sets OMP_NUM_THREADS to (cores / processes per host)
// unless it is already set, so N processes do not each start one OpenMP thread per core.

}  // namespace brisk::accelerate::env

namespace brisk::accelerate {

// The exit status of a program that stopped because its job was preempted
// (Accelerator::stop_if_preempted), and of the `brisk launch` that ran it, which never restarts
// such a job: sysexits.h's EX_TEMPFAIL, "try again later" (docs/fault-tolerance.md).
inline constexpr int kPreemptedStatus = 75;
// The file a preempted run leaves in <project_dir>/checkpoints (the checkpoint's folder name and
// the signal): the next start of the same program continues from the newest checkpoint by itself.
inline constexpr const char* kPreemptedMarker = "PREEMPTED";

}  // namespace brisk::accelerate
