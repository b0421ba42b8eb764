# tpgen behind NVIDIA Triton Inference Server (label triton): the real tritonserver of the
# `nvidia-pytriton` wheel with launcher/triton/model_repository, tpgen at TP 2 (docs/TRITON.md;
# tests/triton/triton_test.py says what each part checks). The setup test installs the wheel and
# tritonclient into a venv in the build tree (tools/dev/install-triton.sh, reused when present); when
# it cannot, it fails and the test does not run (never skipped as passed).
add_test(NAME triton_install COMMAND bash ${CMAKE_SOURCE_DIR}/tools/dev/install-triton.sh ${TPGEN_TRITON_VENV})
set_tests_properties(triton_install PROPERTIES LABELS "triton" TIMEOUT 900 FIXTURES_SETUP triton_venv)
add_test(NAME triton_serve_tp2
         COMMAND ${TPGEN_TRITON_VENV}/bin/python ${CMAKE_CURRENT_SOURCE_DIR}/triton/triton_test.py
                 $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                 ${CMAKE_CURRENT_BINARY_DIR}/triton/tp2 ${TPGEN_TRITON_VENV})
set_tests_properties(triton_serve_tp2 PROPERTIES LABELS "triton;mpi" TIMEOUT 240 FIXTURES_REQUIRED triton_venv)
# CodeGen2.5's checkpoint directory as it is (tests/codegen25.cmake regenerates it): load, greedy
# generate / generate_stream == tpgen generate (held to HF's ids), logprobs, unload; the short part
add_test(NAME triton_codegen25_tp2
         COMMAND ${TPGEN_TRITON_VENV}/bin/python ${CMAKE_CURRENT_SOURCE_DIR}/triton/triton_test.py
                 $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2 ${CG25_MODEL} ${CG25_MODEL}
                 ${CMAKE_CURRENT_BINARY_DIR}/triton/codegen25 ${TPGEN_TRITON_VENV} codegen25)
set_tests_properties(triton_codegen25_tp2 PROPERTIES LABELS "triton;mpi;codegen25" TIMEOUT 180
                     FIXTURES_REQUIRED "triton_venv;codegen25_model")

# launcher/tpgen-triton.sbatch on the one-node test Slurm cluster of tests/slurm.cmake (its fixture
# and lock); reported SKIPPED where that cluster cannot run (no root, no slurm-wlm).
if(TEST slurm_cluster_start)
  add_test(NAME triton_slurm
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/triton/slurm_triton.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/triton/slurm ${TPGEN_TRITON_VENV})
  set_tests_properties(triton_slurm PROPERTIES LABELS "triton;slurm;mpi" TIMEOUT 180
                       FIXTURES_REQUIRED "slurm_cluster;triton_venv" RESOURCE_LOCK slurm_cluster
                       ENVIRONMENT "SLURM_CONF=${TPGEN_SLURM_DIR}/etc/slurm.conf")
else()
  add_test(NAME triton_slurm COMMAND sh -c "echo 'SKIPPED: needs the Slurm test cluster (root, slurm-wlm + munge)'; exit 77")
  set_tests_properties(triton_slurm PROPERTIES LABELS "triton;slurm" SKIP_RETURN_CODE 77)
endif()
