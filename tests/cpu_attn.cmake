# Attention kernels of the CPU backends (kernels/cpu/cpu_attn.h), f32 and bf16 K/V: each build
# (plain C, AVX2 + FMA, AVX-512) against a double reference, and the vector builds against the
# plain-C twin (SKIPPED where this CPU lacks the ISA). Labels unit, ops and bf16.
add_executable(test_cpu_attn ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/test_cpu_attn.c)
target_link_libraries(test_cpu_attn PRIVATE tpgen_kernels ${MATH_LIB})
foreach(isa c avx2 avx512)
  add_test(NAME cpu_attn_${isa} COMMAND test_cpu_attn 2 ${isa})
  set_tests_properties(cpu_attn_${isa} PROPERTIES LABELS "unit;ops;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
# 3 threads: items of uneven cost spread over an odd thread count
add_test(NAME cpu_attn_avx2_3threads COMMAND test_cpu_attn 3 avx2)
set_tests_properties(cpu_attn_avx2_3threads PROPERTIES LABELS "unit;ops;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
# Bad input (label errors): an unknown TPGEN_CPU_ATTN ends every rank with a message naming it.
add_test(NAME errors_cpu_attn_isa COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh
         "TPGEN_CPU_ATTN=sse9: expected avx512, avx2 or c"
         ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${TPGEN_TEST_DATA}/tiny-f32
         --prompt-ids 1,2 --max-new-tokens 2 --backend cpu --threads 1)
set_tests_properties(errors_cpu_attn_isa PROPERTIES LABELS "errors;mpi;ops" TIMEOUT 90
                     ENVIRONMENT "TPGEN_CPU_ATTN=sse9;OMPI_MCA_odls_base_sigkill_timeout=0")
# TPGEN_CPU_ISA caps the attention family too (each tier this CPU runs, f32 and bf16);
# TPGEN_CPU_ATTN still wins; --verbose names the build and why; unforced, 64-dim heads are
# measured at load, the choice cached (written, read back, an edited line obeyed, off, forced).
add_test(NAME cpu_attn_isa_cap COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/isa_cap.sh $<TARGET_FILE:tpgen>
         ${CMAKE_SOURCE_DIR}/configs/tiny-demo.json ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/heads-d64.json)
set_tests_properties(cpu_attn_isa_cap PROPERTIES LABELS "unit;ops;bf16" TIMEOUT 240)
# The kernel cache's temporary file is made exclusively (mkstemp): a symlink planted at the name
# tpgen used to write (PATH.<pid>.tmp) is not followed, its target untouched (issue 41 item 5).
add_test(NAME cpu_attn_cache_symlink COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/cache_symlink.sh
         $<TARGET_FILE:tpgen> ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/heads-d64.json)
set_tests_properties(cpu_attn_cache_symlink PROPERTIES LABELS "unit;ops;reliability" TIMEOUT 60)
# The kernel cache is per machine: one file shared by two host names (a UTS namespace; root, else
# SKIPPED) holds a line for each, neither host takes the other's choice, and 6 hosts writing at once
# all keep their lines (the rewrite under PATH.lock) (issue 42).
add_test(NAME cpu_attn_cache_per_host COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/cache_per_host.sh
         $<TARGET_FILE:tpgen> ${CMAKE_CURRENT_SOURCE_DIR}/cpu_attn/heads-d64.json)
set_tests_properties(cpu_attn_cache_per_host PROPERTIES LABELS "unit;ops;multinode" TIMEOUT 60 SKIP_RETURN_CODE 77)
