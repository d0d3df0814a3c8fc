# CTest runs of the real `brisk` executable (included from tests/CMakeLists.txt).
# Multi-process tests hold the "cpu_cores" lock and use one OpenMP thread per process so they do
# not fight over the machine's cores.
add_executable(brisk_test_rank_exit ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/rank_exit.cpp)
target_link_libraries(brisk_test_rank_exit PRIVATE brisk_options)

set(_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/accelerate_cli)
# No test may read or write the user's real ~/.config/brisk.
set(_cli_env "XDG_CONFIG_HOME=${_cli_dir}/xdg;OMP_NUM_THREADS=1")

add_test(NAME accelerate.cli.help COMMAND brisk_cli --help)
set_tests_properties(accelerate.cli.help PROPERTIES LABELS "unit"
  PASS_REGULAR_EXPRESSION "launch .*config .*env .*test ")

add_test(NAME accelerate.cli.launch_help COMMAND brisk_cli launch --help)
set_tests_properties(accelerate.cli.launch_help PROPERTIES LABELS "unit"
  PASS_REGULAR_EXPRESSION "-n, --num-processes.*--mixed-precision.*--gpu-ids.*--config-file.*--timeout")

foreach(sub config env test)
  add_test(NAME accelerate.cli.${sub}_help COMMAND brisk_cli ${sub} --help)
  set_tests_properties(accelerate.cli.${sub}_help PROPERTIES LABELS "unit" PASS_REGULAR_EXPRESSION "usage: brisk ${sub}")
endforeach()

add_test(NAME accelerate.cli.unknown_command_suggests COMMAND brisk_cli lanch)
set_tests_properties(accelerate.cli.unknown_command_suggests PROPERTIES LABELS "unit"
  PASS_REGULAR_EXPRESSION "unknown command 'lanch'. Did you mean 'brisk launch'")

add_test(NAME accelerate.cli.env COMMAND brisk_cli env)
set_tests_properties(accelerate.cli.env PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  PASS_REGULAR_EXPRESSION "brisk version: .*Compiler: .*GPUs: (no GPU|[0-9]+).*MPI: .*CPU: .*Config: ")

# One process runs the program itself: no mpirun, so a machine without OpenMPI can train.
add_test(NAME accelerate.cli.launch_one_process_runs_directly COMMAND brisk_cli launch --dry-run -n 1 true)
set_tests_properties(accelerate.cli.launch_one_process_runs_directly PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  PASS_REGULAR_EXPRESSION "BRISK_LAUNCHED=1 .*true" FAIL_REGULAR_EXPRESSION "mpirun")

add_test(NAME accelerate.cli.launch_rejects_bad_mixed_precision COMMAND brisk_cli launch --mixed_precision fp8 true)
set_tests_properties(accelerate.cli.launch_rejects_bad_mixed_precision PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  PASS_REGULAR_EXPRESSION "mixed_precision: expected no, fp16 or bf16, got 'fp8'")

add_test(NAME accelerate.cli.launch_dry_run COMMAND brisk_cli launch --dry-run -n 3 --tag-output --gpu_ids 1 --config_file ${_cli_dir}/launch.yaml true)
set_tests_properties(accelerate.cli.launch_dry_run PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config
  PASS_REGULAR_EXPRESSION "CUDA_VISIBLE_DEVICES=1 .*mpirun.* -n 3 .*--tag-output.*btl_tcp_if_include lo.* -x BRISK_MIXED_PRECISION .* true")

# brisk config writes the file the launch tests read.
add_test(NAME accelerate.cli.config_non_interactive
  COMMAND brisk_cli config --non-interactive --num-processes 2 --mixed_precision bf16 --config_file ${_cli_dir}/launch.yaml)
set_tests_properties(accelerate.cli.config_non_interactive PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  FIXTURES_SETUP brisk_cli_config PASS_REGULAR_EXPRESSION "wrote .*launch.yaml.*num_processes: 2.*mixed_precision: bf16")

add_test(NAME accelerate.cli.config_interactive
  COMMAND ${CMAKE_COMMAND} -DBRISK=$<TARGET_FILE:brisk_cli> -DWORK_DIR=${_cli_dir}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_config_interactive.cmake)
set_tests_properties(accelerate.cli.config_interactive PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

add_test(NAME accelerate.cli.launch_exit_status
  COMMAND ${CMAKE_COMMAND} -DBRISK=$<TARGET_FILE:brisk_cli> -DPROGRAM=$<TARGET_FILE:brisk_test_rank_exit>
    -DCONFIG=${_cli_dir}/launch.yaml -P ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_launch.cmake)
set_tests_properties(accelerate.cli.launch_exit_status PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config RESOURCE_LOCK cpu_cores TIMEOUT 300)

foreach(n 2 4)
  add_test(NAME accelerate.cli.test_${n}_processes COMMAND brisk_cli test -n ${n})
  set_tests_properties(accelerate.cli.test_${n}_processes PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
    RESOURCE_LOCK cpu_cores TIMEOUT 300 PASS_REGULAR_EXPRESSION "[0-9]+ passed, 0 failed" FAIL_REGULAR_EXPRESSION "\\| FAIL ")
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/accelerator_tests.cmake)
