# Fuzz targets (label fuzz). Each harness tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput.
# Every build links it with tests/fuzz/replay_main.c into fuzz_replay_<name>, and ctest replays the
# seed corpus (tests/fuzz/corpus/<name>/) and every kept crash input (tests/fuzz/regress/<name>/)
# through it, so the regressions run with any compiler. With -DTPGEN_FUZZ=ON (clang; see
# tools/dev/fuzz.sh) it is also linked with libFuzzer into fuzz_<name>, instrumented with
# -fsanitize=fuzzer,address,undefined together with the libraries it uses.
#
# tpgen_fuzz_target(NAME [SOURCES project .c files compiled into the target] [LIBS targets])
option(TPGEN_FUZZ "Build the libFuzzer targets (needs clang; tools/dev/fuzz.sh runs them)" OFF)
set(FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
set(FUZZ_SAN -fsanitize=address,undefined -fno-sanitize-recover=undefined)
if(TPGEN_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TPGEN_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
  endif()
  # The code under test gets coverage instrumentation and the sanitizers too.
  foreach(lib tpgen_util tpgen_tokenizer tpgen_checkpoint tpgen_model tpgen_sched tpgen_server tpgen_comm)
    target_compile_options(${lib} PRIVATE -g -fsanitize=fuzzer-no-link ${FUZZ_SAN})
  endforeach()
  # the kernels: sanitizers without coverage (their loops are the same for every request)
  # (ASan checks keep their omp simd loops scalar: clang says so, -Wpass-failed, for each)
  target_compile_options(tpgen_kernels PRIVATE -g ${FUZZ_SAN} -Wno-pass-failed)
  add_custom_target(fuzzers)
endif()

function(tpgen_fuzz_target name)
  cmake_parse_arguments(F "" "" "SOURCES;LIBS" ${ARGN})
  set(srcs ${FUZZ_DIR}/fuzz_${name}.c)
  foreach(s ${F_SOURCES})
    list(APPEND srcs ${CMAKE_SOURCE_DIR}/${s})
  endforeach()
  set(defs TPGEN_FUZZ_TOKENIZER_DATA="${TPGEN_TEST_DATA}/tokenizer"
           TPGEN_FUZZ_MODEL_DIR="${CMAKE_SOURCE_DIR}/models/codegen-tiny-py")
  add_executable(fuzz_replay_${name} ${srcs} ${FUZZ_DIR}/replay_main.c)
  target_link_libraries(fuzz_replay_${name} PRIVATE ${F_LIBS})
  target_compile_definitions(fuzz_replay_${name} PRIVATE ${defs})
  file(GLOB regress CONFIGURE_DEPENDS ${FUZZ_DIR}/regress/${name}/*) # a new crash input reconfigures
  set(inputs ${FUZZ_DIR}/corpus/${name} ${regress})
  add_test(NAME fuzz_replay_${name} COMMAND fuzz_replay_${name} ${inputs})
  set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS fuzz TIMEOUT 60)
  if(TPGEN_FUZZ)
    # the instrumented libraries need the sanitizer runtimes in the replay driver too
    target_compile_options(fuzz_replay_${name} PRIVATE -g ${FUZZ_SAN})
    target_link_options(fuzz_replay_${name} PRIVATE ${FUZZ_SAN})
    add_executable(fuzz_${name} ${srcs})
    target_link_libraries(fuzz_${name} PRIVATE ${F_LIBS})
    target_compile_definitions(fuzz_${name} PRIVATE ${defs})
    target_compile_options(fuzz_${name} PRIVATE -g -fsanitize=fuzzer ${FUZZ_SAN})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer ${FUZZ_SAN})
    set_target_properties(fuzz_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    add_dependencies(fuzzers fuzz_${name} fuzz_replay_${name})
  endif()
endfunction()

# One line per target; tools/dev/fuzz.sh runs every fuzz_<name> it finds in build-fuzz/fuzz/.
tpgen_fuzz_target(json LIBS tpgen_util)
tpgen_fuzz_target(safetensors LIBS tpgen_checkpoint)
tpgen_fuzz_target(safetensors_index LIBS tpgen_checkpoint)
tpgen_fuzz_target(tokenizer LIBS tpgen_tokenizer)
tpgen_fuzz_target(prompts SOURCES launcher/prompts.c LIBS tpgen_tokenizer)
tpgen_fuzz_target(sampler SOURCES engine/sched/sampler.c engine/model/candidates.c LIBS ${MATH_LIB})
tpgen_fuzz_target(bin LIBS tpgen_checkpoint)
# launcher/server/openai.c's request parser on a tp_server the harness fills: no model, no MPI (the engine
# functions it calls, the request builder, KV count and free, are engine/sched/request.c, the knobs' table,
# defaults and validation engine/sched/request_params.c, and engine/tokenizer/fim.c for `suffix`)
find_package(Threads REQUIRED)
tpgen_fuzz_target(server_request SOURCES launcher/server/openai.c launcher/server/jbuf.c engine/sched/request.c engine/sched/request_params.c
                  engine/tokenizer/fim.c LIBS tpgen_tokenizer Threads::Threads)
# Whole requests in one process (TP 1): body -> srv_parse_completion -> the server's engine loop
# (scheduler, sampler) -> the response, on models/codegen-tiny-py; the model is loaded as
# `tpgen serve` does (launcher/job.c, launcher/args.c). Its replay test runs the engine.
tpgen_fuzz_target(request SOURCES launcher/job.c launcher/args.c LIBS tpgen_server MPI::MPI_C)
set_tests_properties(fuzz_replay_request PROPERTIES LABELS "fuzz;mpi" TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
