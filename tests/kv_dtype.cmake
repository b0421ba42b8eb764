# --kv-cache-dtype bf16 on the f32 CPU backend (label kv_dtype): K and V rounded to bf16 when written
# to the cache, attention in f32 over them (kernels/cpu/cpu_attn.h; the kernels' own tests,
# f32 q over bf16 K/V against the double reference and the C twin: tests/cpu_attn.cmake).
# HF parity against HF f32 (expected.json) at TP 2 on every fixture: greedy ids equal, each
# log-probability within 0.025 nats and their mean |d| within 0.005 (measured on these fixtures:
# 0.0124 and 0.0020; bf16 rounds each K/V element by at most 2^-9 relative; docs/USAGE.md).
foreach(np 2)
  add_test(NAME parity_cpu_kv_bf16_tp${np}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cpu --threads 1 --np ${np} --ref hf-f32
                   --tol 0.025 --mean-tol 0.005 --extra "--kv-cache-dtype bf16" --timeout 120 --build ${CMAKE_BINARY_DIR})
  set_tests_properties(parity_cpu_kv_bf16_tp${np} PROPERTIES LABELS "parity;mpi;kv_dtype" TIMEOUT 300)
endforeach()
# int8 weights over bf16 K/V (TP 1): tests/cpu_int8/parity_int8.sh's bound (0.15) holds with the K/V rounding added
add_test(NAME parity_cpu_kv_bf16_int8_tp1
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cpu --threads 1 --np 1 --ref hf-f32
                 --tol 0.15 --extra "--weights int8 --kv-cache-dtype bf16" --timeout 120 --build ${CMAKE_BINARY_DIR})
set_tests_properties(parity_cpu_kv_bf16_int8_tp1 PROPERTIES LABELS "parity;mpi;kv_dtype" TIMEOUT 300)
# The cache is bf16: the log says so and the memory plan's K/V bytes per token are half of f32's
# (tiny-f32: 2 layers x 64 x (K, V) x 2 bytes = 512).
add_test(NAME kv_bf16_plan COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 1 $<TARGET_FILE:tpgen> generate
         --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu --threads 1
         --kv-cache-dtype bf16 --verbose)
set_tests_properties(kv_bf16_plan PROPERTIES LABELS "kv_dtype;mpi" TIMEOUT 90 PASS_REGULAR_EXPRESSION
  "backend cpu \\(F32, bf16 K/V\\).*KV cache .* 512 bytes per token")
# auto (the default) is the activations' dtype; bf16 under --dtype bf16 is that too
add_test(NAME kv_auto_plan COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 1 $<TARGET_FILE:tpgen> generate
         --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu --threads 1
         --kv-cache-dtype auto --verbose)
set_tests_properties(kv_auto_plan PROPERTIES LABELS "kv_dtype;mpi" TIMEOUT 90 PASS_REGULAR_EXPRESSION
  "backend cpu \\(F32\\).*KV cache .* 1024 bytes per token")
tpgen_expect_error(errors_kv_dtype_value "--kv-cache-dtype must be auto .K and V in the activations' dtype"
                   LABELS "errors;mpi;kv_dtype" ARGS generate --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2
                   --max-new-tokens 1 --backend cpu --threads 1 --kv-cache-dtype f16)
# `tpgen info --kv-cache-dtype bf16` plans the cache in 2 bytes (tiny-f32 at TP 1: 512 bytes a token), and
# refuses it under 16-bit activations
add_test(NAME kv_bf16_info COMMAND $<TARGET_FILE:tpgen> info --model ${TPGEN_TEST_DATA}/tiny-f32 --kv-cache-dtype bf16)
set_tests_properties(kv_bf16_info PROPERTIES LABELS "kv_dtype" TIMEOUT 60 PASS_REGULAR_EXPRESSION
  "KV cache in bf16 \\(--kv-cache-dtype bf16\\)\n  TP [^\n]*\n  1 +[0-9.]+ [KMG]iB +512 ")
tpgen_expect_error(errors_kv_bf16_info_f16 "--kv-cache-dtype bf16 is for f32 activations on the CPU .here: f16"
                   NP 0 DRIVER_FLAGS --status 2 LABELS "errors;kv_dtype"
                   ARGS info --model ${TPGEN_TEST_DATA}/tiny-f32 --dtype f16 --kv-cache-dtype bf16)
tpgen_expect_error(errors_kv_dtype_info_value "--kv-cache-dtype must be auto or bf16, got .f16."
                   NP 0 DRIVER_FLAGS --status 2 LABELS "errors;kv_dtype"
                   ARGS info --model ${TPGEN_TEST_DATA}/tiny-f32 --kv-cache-dtype f16)
