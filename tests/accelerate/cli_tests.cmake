# CTest runs of the real `brisk` executable (included from tests/CMakeLists.txt).
# Multi-process tests hold the "cpu_cores" lock and use one OpenMP thread per process so they do
# not fight over the machine's cores.
add_executable(brisk_test_rank_exit ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/rank_exit.cpp)
target_link_libraries(brisk_test_rank_exit PRIVATE brisk_options)

set(_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/accelerate_cli)
# No test may read or write the user's real ~/.config/brisk.
set(_cli_env "XDG_CONFIG_HOME=${_cli_dir}/xdg;OMP_NUM_THREADS=1")

set(_brisk $<TARGET_FILE:brisk_cli>)
add_test(NAME accelerate.cli.help COMMAND ${BRISK_TEST_JOB} --grep "launch .*config .*env .*test " -- ${_brisk} --help)
set_tests_properties(accelerate.cli.help PROPERTIES LABELS "unit")

add_test(NAME accelerate.cli.launch_help COMMAND ${BRISK_TEST_JOB}
  --grep "-n, --num-processes.*--mixed-precision.*--gpu-ids.*--config-file.*--timeout" -- ${_brisk} launch --help)
set_tests_properties(accelerate.cli.launch_help PROPERTIES LABELS "unit")

foreach(sub config env test)
  add_test(NAME accelerate.cli.${sub}_help COMMAND ${BRISK_TEST_JOB} --grep "usage: brisk ${sub}" -- ${_brisk} ${sub} --help)
  set_tests_properties(accelerate.cli.${sub}_help PROPERTIES LABELS "unit")
endforeach()

add_test(NAME accelerate.cli.unknown_command_suggests COMMAND ${BRISK_TEST_JOB} --exit-code 2
  --grep "unknown command 'lanch'. Did you mean 'brisk launch'" -- ${_brisk} lanch)
set_tests_properties(accelerate.cli.unknown_command_suggests PROPERTIES LABELS "unit")

add_test(NAME accelerate.cli.env COMMAND ${BRISK_TEST_JOB}
  --grep "brisk version: .*Compiler: .*GPUs: (no GPU|[0-9]+).*MPI: .*CPU: .*Config: " -- ${_brisk} env)
set_tests_properties(accelerate.cli.env PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

# One process runs the program itself: no mpirun, so a machine without OpenMPI can train.
add_test(NAME accelerate.cli.launch_one_process_runs_directly COMMAND ${BRISK_TEST_JOB}
  --grep "BRISK_LAUNCHED=1 .*true" --reject "mpirun" -- ${_brisk} launch --dry-run -n 1 true)
set_tests_properties(accelerate.cli.launch_one_process_runs_directly PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

add_test(NAME accelerate.cli.launch_rejects_bad_mixed_precision COMMAND ${BRISK_TEST_JOB} --expect fail
  --grep "mixed_precision: 'fp8' is not valid; expected one of: no, fp16, bf16" -- ${_brisk} launch --mixed_precision fp8 true)
set_tests_properties(accelerate.cli.launch_rejects_bad_mixed_precision PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}")

add_test(NAME accelerate.cli.launch_dry_run COMMAND ${BRISK_TEST_JOB}
  --grep "CUDA_VISIBLE_DEVICES=1 .*mpirun.* -n 3 .*--tag-output.*btl_tcp_if_include lo.* -x BRISK_MIXED_PRECISION .* true"
  -- ${_brisk} launch --dry-run -n 3 --tag-output --gpu_ids 1 --config_file ${_cli_dir}/launch.yaml true)
set_tests_properties(accelerate.cli.launch_dry_run PROPERTIES LABELS "unit" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config)

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
    -DCONFIG=${_cli_dir}/launch.yaml -P ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/check_launch.cmake)
set_tests_properties(accelerate.cli.launch_exit_status PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
  FIXTURES_REQUIRED brisk_cli_config RESOURCE_LOCK cpu_cores TIMEOUT 300)

foreach(n 2 4)
  add_test(NAME accelerate.cli.test_${n}_processes COMMAND ${BRISK_TEST_JOB} --timeout 280
    --grep "[0-9]+ passed, 0 failed" --reject "\\| FAIL " -- ${_brisk} test -n ${n})
  set_tests_properties(accelerate.cli.test_${n}_processes PROPERTIES LABELS "multiprocess" ENVIRONMENT "${_cli_env}"
    RESOURCE_LOCK cpu_cores TIMEOUT 300)
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/accelerator_tests.cmake)
