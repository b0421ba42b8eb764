# The CPU threading model (util/threads.h, docs/PERFORMANCE.md "Threading"), label threads:
# the thread-count rule as a unit, and the runtimes' settings as libgomp and `tpgen info` see them.
add_executable(test_threads_rule ${CMAKE_CURRENT_SOURCE_DIR}/threads/test_threads_rule.c)
target_link_libraries(test_threads_rule PRIVATE tpgen_util)
target_include_directories(test_threads_rule PRIVATE ${PROJECT_SOURCE_DIR})
add_test(NAME threads_rule COMMAND test_threads_rule)
set_tests_properties(threads_rule PROPERTIES LABELS "threads;unit" TIMEOUT 30)
add_test(NAME threads_env
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/threads/threads_env.sh $<TARGET_FILE:tpgen>
                 ${PROJECT_SOURCE_DIR}/launcher/tpgen-mpirun ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(threads_env PROPERTIES LABELS "threads;launcher;mpi" TIMEOUT 120
                     ENVIRONMENT "TPGEN_BIN=$<TARGET_FILE:tpgen>")
# OpenBLAS on a CPU newer than the library (kernels/cpu/cpu_blas_core.c): the core tpgen names
add_executable(test_blas_core ${CMAKE_CURRENT_SOURCE_DIR}/threads/test_blas_core.c)
target_link_libraries(test_blas_core PRIVATE tpgen_kernels)
add_test(NAME threads_blas_core COMMAND test_blas_core)
set_tests_properties(threads_blas_core PROPERTIES LABELS "threads;unit" TIMEOUT 30)
