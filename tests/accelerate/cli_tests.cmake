# CTest runs of the real `brisk` executable (included from tests/CMakeLists.txt).
# Multi-process tests hold the "cpu_cores" lock (at most two at once: brisk_locked_tests_first in
# CMakeLists.txt) and use one OpenMP thread per process so they do not fight over the cores.
add_executable(brisk_test_rank_exit ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/rank_exit.cpp)
target_link_libraries(brisk_test_rank_exit PRIVATE brisk_options)

set(_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/accelerate_cli)
# No test may read or write the user's real ~/.config/brisk.
set(_cli_env "XDG_CONFIG_HOME=${_cli_dir}/xdg;OMP_NUM_THREADS=1")

set(_brisk $<TARGET_FILE:brisk_cli>)
add_test(NAME accelerate.cli.help COMMAND ${BRISK_TEST_JOB} --grep "launch .*config .*env .*test " -- ${_brisk} --help)
set_tests_properties(accelerate.cli.help PROPERTIES LABELS "unit")

add_test(NAME accelerate.cli.launch_help COMMAND ${BRISK_TEST_JOB}
  --grep "--config-file.*--multi-gpu.*--mixed-precision.*-n, --num-processes.*--machine-rank.*--main-process-ip.*--gpu-ids.*--gradient-accumulation-steps.*--num-cpu-threads-per-process.*--mpirun-hostfile.*--timeout" -- ${_brisk} launch --help)
set_tests_properties(accelerate.cli.launch_help PROPERTIES LABELS "unit")

foreach(sub config env test merge-weights estimate-memory)
  add_test(NAME accelerate.cli.${sub}_help COMMAND ${BRISK_TEST_JOB} --grep "usage: brisk ${sub}" -- ${_brisk} ${sub} --help)
  set_tests_properties(accelerate.cli.${sub}_help PROPERTIES LABELS "unit")
endforeach()

add_test(NAME accelerate.cli.unknown_command_suggests COMMAND ${BRISK_TEST_JOB} --exit-code 2
  --grep "unknown command 'lanch'. Did you mean 'brisk launch'" -- ${_brisk} lanch)
set_tests_properties(accelerate.cli.unknown_command_suggests PROPERTIES LABELS "unit")

add_test(NAME accelerate.cli.env COMMAND ${BRISK_TEST_JOB}
  --grep "brisk version: .*Compiler: .*GPUs: (no GPU|[0-9]+).*MPI: .*CPU: .*Config: " -- ${_brisk} env)
set_tests_properties(accelerate.cli.env PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")
# How bf16 products run, switched off by the environment (on any CPU), and a bad value named, not fatal.
add_test(NAME accelerate.cli.env_bf16_switch COMMAND ${BRISK_TEST_JOB}
  --grep "CPU bf16 products: converted to f32" -- ${_brisk} env)
set_tests_properties(accelerate.cli.env_bf16_switch PROPERTIES LABELS "unit"
  ENVIRONMENT "${_cli_env};BRISK_CPU_BF16_DOT=0")
add_test(NAME accelerate.cli.env_bf16_bad_value COMMAND ${BRISK_TEST_JOB}
  --grep "CPU bf16 products: error: .*BRISK_CPU_BF16_DOT='maybe' is not a boolean" -- ${_brisk} env)
set_tests_properties(accelerate.cli.env_bf16_bad_value PROPERTIES LABELS "unit"
  ENVIRONMENT "${_cli_env};BRISK_CPU_BF16_DOT=maybe")

# One process runs the program itself: no mpirun, so a machine without OpenMPI can train.
add_test(NAME accelerate.cli.launch_one_process_runs_directly COMMAND ${BRISK_TEST_JOB}
  --grep "BRISK_LAUNCHED=1 .*true" --reject "mpirun" -- ${_brisk} launch --dry-run -n 1 true)
set_tests_properties(accelerate.cli.launch_one_process_runs_directly PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

add_test(NAME accelerate.cli.launch_rejects_bad_mixed_precision COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "mixed_precision: 'fp8' is not valid; expected one of: no, fp16, bf16" -- ${_brisk} launch --mixed_precision fp8 true)
set_tests_properties(accelerate.cli.launch_rejects_bad_mixed_precision PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

# The config file `brisk config` writes is YAML: a build without yaml-cpp passes the setting as a flag.
if(BRISK_HAVE_YAML_CPP)
  set(_cli_settings --config_file ${_cli_dir}/launch.yaml)
  set(_cli_config ${_cli_dir}/launch.yaml)
else()
  set(_cli_settings --mixed_precision bf16)
  set(_cli_config "")
endif()
add_test(NAME accelerate.cli.launch_dry_run COMMAND ${BRISK_TEST_JOB}
  --grep "CUDA_VISIBLE_DEVICES=1 .*mpirun.* -n 3 .*--tag-output.*btl_tcp_if_include lo.* -x BRISK_MIXED_PRECISION .* true"
  -- ${_brisk} launch --dry-run -n 3 --tag-output --gpu_ids 1 ${_cli_settings} true)
set_tests_properties(accelerate.cli.launch_dry_run PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config)

# Accelerate's launch flags, with their meaning: accumulation and threads reach the processes;
# the rendezvous flags of one machine are ignored, as accelerate launch ignores them.
add_test(NAME accelerate.cli.launch_accelerate_flags COMMAND ${BRISK_TEST_JOB}
  --grep "BRISK_GRADIENT_ACCUMULATION_STEPS=4 .*OMP_NUM_THREADS=1 .*mpirun.* -n 3 .* true" --reject "MAIN_PROCESS"
  -- ${_brisk} launch --dry-run --cpu --num_processes 3 --gradient_accumulation_steps 4
     --num-cpu-threads-per-process 1 --machine_rank 0 --main_process_ip 10.0.0.1 --main_process_port 29500 true)
set_tests_properties(accelerate.cli.launch_accelerate_flags PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

file(WRITE ${_cli_dir}/two_hosts "# the main host first\nhost-a slots=2\nhost-b slots=2\n")
add_test(NAME accelerate.cli.launch_mpirun_hostfile COMMAND ${BRISK_TEST_JOB}
  --grep "mpirun.* -n 4 .*--hostfile .*two_hosts.* true"
  -- ${_brisk} launch --dry-run --cpu -n 4 --num_machines 2 --mpirun_hostfile ${_cli_dir}/two_hosts
     --main_process_ip host-a true)
set_tests_properties(accelerate.cli.launch_mpirun_hostfile PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")
add_test(NAME accelerate.cli.launch_other_machine_rank_refused COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "machine_rank is 1: brisk launch runs only on the main machine"
  -- ${_brisk} launch --dry-run --cpu -n 4 --num_machines 2 --hostfile ${_cli_dir}/two_hosts --machine_rank 1 true)
set_tests_properties(accelerate.cli.launch_other_machine_rank_refused PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")
add_test(NAME accelerate.cli.launch_main_ip_not_first_refused COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "main_process_ip is host-b but the hostfile's first host is host-a"
  -- ${_brisk} launch --dry-run --cpu -n 4 --num_machines 2 --hostfile ${_cli_dir}/two_hosts --main_process_ip host-b true)
set_tests_properties(accelerate.cli.launch_main_ip_not_first_refused PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")
add_test(NAME accelerate.cli.launch_two_machines_without_hostfile_explains COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "brisk starts a multi-machine job from one machine: run `brisk launch` there only"
  -- ${_brisk} launch --dry-run --cpu -n 4 --num_machines 2 --main_process_ip 10.0.0.1 true)
set_tests_properties(accelerate.cli.launch_two_machines_without_hostfile_explains PROPERTIES LABELS "unit"
  ENVIRONMENT "${_cli_env}")

# The default_config.yaml `accelerate config` writes (CPU, 2 processes, DeepSpeed answered) drives
# brisk launch unchanged (deepspeed_config.zero_stage becomes BRISK_SHARDING); what brisk cannot use is named once.
if(BRISK_HAVE_YAML_CPP)
  file(WRITE ${_cli_dir}/accelerate_default_config.yaml
    "compute_environment: LOCAL_MACHINE\ndebug: false\ndeepspeed_config:\n  zero_stage: 2\n"
    "distributed_type: MULTI_CPU\ndowncast_bf16: 'no'\nenable_cpu_affinity: false\nipex_config:\n  ipex: false\n"
    "machine_rank: 0\nmain_process_ip: null\nmain_process_port: null\nmain_training_function: main\n"
    "mixed_precision: bf16\nmpirun_config: {}\nnum_machines: 1\nnum_processes: 2\nrdzv_backend: static\n"
    "same_network: true\ntpu_env: []\ntpu_use_cluster: false\ntpu_use_sudo: false\nuse_cpu: true\n")
  add_test(NAME accelerate.cli.launch_reads_accelerate_config COMMAND ${BRISK_TEST_JOB}
    --grep "BRISK_MIXED_PRECISION=bf16 .*BRISK_SHARDING=zero2 .*mpirun.* -n 2 "
    -- ${_brisk} launch --dry-run --config_file ${_cli_dir}/accelerate_default_config.yaml true)
  set_tests_properties(accelerate.cli.launch_reads_accelerate_config PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")
endif()

# brisk config writes the file the launch tests read.
add_test(NAME accelerate.cli.config_non_interactive
  COMMAND ${BRISK_TEST_JOB} --grep "wrote .*launch.yaml.*num_processes: 2.*mixed_precision: bf16"
    -- ${_brisk} config --non-interactive --num-processes 2 --mixed_precision bf16 --config_file ${_cli_dir}/launch.yaml)
set_tests_properties(accelerate.cli.config_non_interactive PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  FIXTURES_SETUP brisk_cli_config)

add_test(NAME accelerate.cli.config_interactive
  COMMAND ${CMAKE_COMMAND} -DBRISK=$<TARGET_FILE:brisk_cli> -DWORK_DIR=${_cli_dir}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_config_interactive.cmake)
set_tests_properties(accelerate.cli.config_interactive PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

add_test(NAME accelerate.cli.launch_exit_status
  COMMAND ${BRISK_TEST_JOB} --timeout 280 --
    ${CMAKE_COMMAND} -DBRISK=$<TARGET_FILE:brisk_cli> -DPROGRAM=$<TARGET_FILE:brisk_test_rank_exit>
    "-DCONFIG=${_cli_config}" -P ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_launch.cmake)
set_tests_properties(accelerate.cli.launch_exit_status PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config RESOURCE_LOCK cpu_cores TIMEOUT 300)

foreach(n 2 4)
  add_test(NAME accelerate.cli.test_${n}_processes COMMAND ${BRISK_TEST_JOB} --timeout 280
    --grep "[0-9]+ passed, 0 failed" --reject "\\| FAIL " -- ${_brisk} test -n ${n})
  set_tests_properties(accelerate.cli.test_${n}_processes PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
    RESOURCE_LOCK cpu_cores TIMEOUT 300)
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/accelerator_tests.cmake)

# `brisk plot`: a PNG and an SVG of two small runs, and its errors (skipped without gnuplot,
# after the checks that need none).
add_test(NAME accelerate.cli.plot COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_plot.sh ${_brisk})
set_tests_properties(accelerate.cli.plot PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 60)

# The config files `brisk config` writes load with Accelerate's own loader, and Accelerate's rewrite
# launches the same job (skipped where Python cannot import accelerate; e.g. the GPU machine has it).
add_test(NAME accelerate.cli.accelerate_loader
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/accelerate-loader-check.sh ${_brisk})
set_tests_properties(accelerate.cli.accelerate_loader PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 60
  ENVIRONMENT "${_cli_env}")

# brisk merge-weights: a folder that is not there is an error naming it (the byte-for-byte tests
# are run_reshard.sh's merge mode and MergeWeights.* in test_accelerate).
add_test(NAME accelerate.cli.merge_weights_missing_folder COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "brisk merge-weights: '${_cli_dir}/no_checkpoint': no such folder"
  -- ${_brisk} merge-weights ${_cli_dir}/no_checkpoint ${_cli_dir}/merged.safetensors)
set_tests_properties(accelerate.cli.merge_weights_missing_folder PROPERTIES LABELS "unit")
