# The whole product on the emulated device (issue 40 item 2; docs/CUDA.md "The emulated device"),
# where tests/gpu_emu.cmake (included before this file, by name) builds lib/libtpgen-cuda-emu.so.
# Default (label gpu_emu, ~80 s on 2 busy cores): int8 weights against HF at hf_parity.sh's GPU
# int8 bound, `tpgen serve --backend cuda` (FIM, scoring, a batch == alone, prefix cache,
# cancellation, deadline, preemption), `tpgen bench`, and the memory plan on a small device.
# -DTPGEN_EMU_FULL=ON adds (label gpu_emu_full, several minutes): parity at TP 4 over the emulated
# NCCL and over MPI, int8 at TP 1 on CodeGen2 and LLaMA/GQA and at TP 2, CodeGen2.5 and LLaMA
# without CUDA graphs, serving at TP 2, the KV plan at TP 2.
option(TPGEN_EMU_FULL "run the whole product on the emulated CUDA device (label gpu_emu_full)" OFF)
if(TARGET tpgen_cuda_emu)
set(EMU_DIR_P ${CMAKE_CURRENT_SOURCE_DIR}/gpu/emu)
set(EMU_PARITY_P bash ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cuda --build ${CMAKE_BINARY_DIR})
set(EMU_ENV "TPGEN_CUDA_MODULE=${TPGEN_CUDA_EMU}")

# int8 weights: within sqrt(0.15^2 + 0.08^2) = 0.17 of HF f32 (hf_parity.sh, docs/CUDA.md "Parity tolerances")
add_test(NAME gpu_emu_parity_int8_codegen_bf16 COMMAND ${EMU_PARITY_P} --dtype bf16 --weights int8
         --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
# serving through the real CUDA module (tests/gpu/emu/serve_emu_test.py says what each part checks)
add_test(NAME gpu_emu_serve_tp1 COMMAND python3 ${EMU_DIR_P}/serve_emu_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
         ${TPGEN_TEST_DATA}/codegen2-f32 f16)
set_tests_properties(gpu_emu_serve_tp1 PROPERTIES FIXTURES_REQUIRED server_deps)
# `tpgen bench` on the emulated device: a tiny run prints its decode rows (batch 1 and 2) and its
# prefill row, on the cuda backend (the rates are the emulator's, not judged)
add_test(NAME gpu_emu_bench_tiny COMMAND $<TARGET_FILE:tpgen> bench --model ${TPGEN_TEST_DATA}/tiny-f32 --backend cuda
         --dtype f16 --batch 1,2 --context 16 --steps 2 --prefill 8 --prefill-runs 1 --json)
set_tests_properties(gpu_emu_bench_tiny PROPERTIES
  PASS_REGULAR_EXPRESSION "\\{\"batch\": 2, [^\n]*\"backend\": \"cuda\"[^\n]*\"kind\": \"decode\"[^\n]*\n\\{\"prefill_tokens\": 8,"
  FAIL_REGULAR_EXPRESSION "error")
# the memory plan on a small device (tests/gpu/emu/mem_emu_test.py): refused before loading with
# the figures; the KV cache takes exactly the planned bytes and fills them
add_test(NAME gpu_emu_mem_too_small COMMAND python3 ${EMU_DIR_P}/mem_emu_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
         too-small ${CMAKE_SOURCE_DIR}/configs/codegen-350M.json)
add_test(NAME gpu_emu_mem_kv_tp1 COMMAND python3 ${EMU_DIR_P}/mem_emu_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
         kv ${TPGEN_TEST_DATA}/tiny-f32 1)
# --int4-activations int8 is the CPU int4 kernels' option: the CUDA backend refuses it, naming why
tpgen_expect_error(gpu_emu_int4_act8_refused "--int4-activations int8 is an option of the CPU int4 kernels. the cuda backend"
                   NP 0 LABELS "gpu_emu;errors;int4" ARGS generate --model ${TPGEN_TEST_DATA}/int4/awq-llama-g32
                   --backend cuda --dtype f16 --int4-activations int8 --prompt-ids 1,2 --max-new-tokens 1)
set_tests_properties(gpu_emu_int4_act8_refused PROPERTIES
                     ENVIRONMENT "OMPI_MCA_odls_base_sigkill_timeout=0;${EMU_ENV}")
# bf16 K/V under f16 activations: the CUDA backend keeps K and V in its activation dtype and says so
tpgen_expect_error(gpu_emu_kv_bf16_refused "--kv-cache-dtype bf16. the cuda backend in f16 keeps K and V in f16"
                   NP 0 LABELS "gpu_emu;errors" ARGS generate --model ${TPGEN_TEST_DATA}/tiny-f32
                   --backend cuda --dtype f16 --kv-cache-dtype bf16 --prompt-ids 1,2 --max-new-tokens 1)
set_tests_properties(gpu_emu_kv_bf16_refused PROPERTIES
                     ENVIRONMENT "OMPI_MCA_odls_base_sigkill_timeout=0;${EMU_ENV}")
set(EMU_PRODUCT_TESTS gpu_emu_parity_int8_codegen_bf16 gpu_emu_serve_tp1 gpu_emu_bench_tiny gpu_emu_mem_too_small
    gpu_emu_mem_kv_tp1)
set_tests_properties(${EMU_PRODUCT_TESTS} PROPERTIES LABELS "gpu_emu;mpi" TIMEOUT 400 ENVIRONMENT "${EMU_ENV}")

if(TPGEN_EMU_FULL)
  add_test(NAME gpu_emu_full_parity_tp4_nccl COMMAND ${EMU_PARITY_P} --dtype bf16 --np 4 --comm nccl
           --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_full_parity_tp4_llama_gqa_mpi COMMAND ${EMU_PARITY_P} --dtype bf16 --np 4 --comm mpi
           --fixtures ${TPGEN_TEST_DATA}/llama-gqa-bf16-sharded)
  add_test(NAME gpu_emu_full_parity_int8_codegen2_f16 COMMAND ${EMU_PARITY_P} --dtype f16 --weights int8
           --fixtures ${TPGEN_TEST_DATA}/codegen2-f32)
  add_test(NAME gpu_emu_full_parity_int8_llama_gqa_bf16 COMMAND ${EMU_PARITY_P} --dtype bf16 --weights int8
           --fixtures ${TPGEN_TEST_DATA}/llama-gqa-bf16-sharded)
  add_test(NAME gpu_emu_full_parity_int8_tp2_nccl COMMAND ${EMU_PARITY_P} --dtype f16 --weights int8 --np 2
           --comm nccl --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_full_parity_llama_no_graphs COMMAND ${EMU_PARITY_P} --dtype f16 --extra=--no-cuda-graphs
           --fixtures ${TPGEN_TEST_DATA}/llama-f32)
  add_test(NAME gpu_emu_full_parity_codegen25_no_graphs COMMAND ${EMU_PARITY_P} --dtype bf16 --extra=--no-cuda-graphs --timeout 500
           --fixtures ${CMAKE_CURRENT_BINARY_DIR}/codegen25-tiny)
  # 51,200 vocabulary rows: a generate takes minutes on the emulator (120 s timed out on 2 busy cores)
  set_tests_properties(gpu_emu_full_parity_codegen25_no_graphs PROPERTIES FIXTURES_REQUIRED codegen25_model)
  add_test(NAME gpu_emu_full_serve_tp2 COMMAND python3 ${EMU_DIR_P}/serve_emu_test.py $<TARGET_FILE:tpgen>
           ${TPGEN_MPIEXEC} 2 ${TPGEN_TEST_DATA}/codegen2-f32 bf16)
  set_tests_properties(gpu_emu_full_serve_tp2 PROPERTIES FIXTURES_REQUIRED server_deps)
  add_test(NAME gpu_emu_full_mem_kv_tp2 COMMAND python3 ${EMU_DIR_P}/mem_emu_test.py $<TARGET_FILE:tpgen>
           ${TPGEN_MPIEXEC} kv ${TPGEN_TEST_DATA}/tiny-f32 2)
  # tpgen behind the real tritonserver (tests/triton.cmake's test and venv), --backend cuda, TP 2 over NCCL
  add_test(NAME gpu_emu_full_triton_tp2
           COMMAND ${TPGEN_TRITON_VENV}/bin/python ${CMAKE_CURRENT_SOURCE_DIR}/triton/triton_test.py
                   $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/triton/emu-tp2 ${TPGEN_TRITON_VENV})
  set_tests_properties(gpu_emu_full_triton_tp2 PROPERTIES FIXTURES_REQUIRED triton_venv)
  set(EMU_FULL_TESTS gpu_emu_full_triton_tp2 gpu_emu_full_parity_tp4_nccl gpu_emu_full_parity_tp4_llama_gqa_mpi
      gpu_emu_full_parity_int8_codegen2_f16 gpu_emu_full_parity_int8_llama_gqa_bf16 gpu_emu_full_parity_int8_tp2_nccl
      gpu_emu_full_parity_llama_no_graphs gpu_emu_full_parity_codegen25_no_graphs gpu_emu_full_serve_tp2
      gpu_emu_full_mem_kv_tp2)
  set_tests_properties(${EMU_FULL_TESTS} PROPERTIES LABELS "gpu_emu_full;mpi" TIMEOUT 600 ENVIRONMENT "${EMU_ENV}")
  set_tests_properties(gpu_emu_full_parity_codegen25_no_graphs PROPERTIES TIMEOUT 1500)
  set_tests_properties(gpu_emu_full_triton_tp2 PROPERTIES ENVIRONMENT "${EMU_ENV};TPGEN_TEST_BACKEND_FLAGS=--backend cuda --dtype f16")
endif()
endif()
