# CodeGen2 checkpoints (label qkv_groups; engine/checkpoint/remote_code.h): the qkv_proj group count read
# from the modeling file a checkpoint ships (auto_map), --qkv-groups, and the refusals. The
# fixture tests/data/codegen2-f32 (tools/fixtures/make_codegen2_fixtures.py: 16 heads, 8 groups) is also
# run by tests/parity.cmake at TP 1, 2, 4; TP 8 is added here (16 heads allow it).
set(QKV_FIX ${TPGEN_TEST_DATA}/codegen2-f32)
set(QKV_DIR ${CMAKE_CURRENT_BINARY_DIR}/qkv_groups)
set(QKV_GEN generate --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu --threads 1)

add_test(NAME parity_codegen2-f32_tp8
         COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np 8 --mpiexec ${TPGEN_MPIEXEC}
                 --fixture ${QKV_FIX} -- --backend cpu --threads 1)
set_tests_properties(parity_codegen2-f32_tp8 PROPERTIES LABELS "parity;qkv_groups;mpi" SKIP_RETURN_CODE 77
                     TIMEOUT 300)

# Copies of the fixture whose remote code tpgen cannot identify: another modeling file, none.
foreach(variant unknown missing inline conflict)
  file(MAKE_DIRECTORY ${QKV_DIR}/${variant})
  foreach(f config.json model.safetensors tokenizer.json expected.json)
    file(COPY ${QKV_FIX}/${f} DESTINATION ${QKV_DIR}/${variant})
  endforeach()
endforeach()
file(WRITE ${QKV_DIR}/unknown/modeling_codegen.py
     "# remote code of some other layout: no mp_num assignment\nclass CodeGenForCausalLM:\n    pass\n")
file(REMOVE ${QKV_DIR}/missing/modeling_codegen.py)
# The statement as CodeGen2's file has it: a local in forward with a trailing comment, passed on as
# a keyword argument (written here, not copied); and a file with two different values.
file(WRITE ${QKV_DIR}/inline/modeling_codegen.py
     "class CodeGenAttention:\n    def forward(self, qkv):\n        mp_num = 8  # TPU-v3 cores\n"
     "        return self._split_heads(qkv, self.num_attention_heads, self.head_dim, mp_num=mp_num)\n")
file(WRITE ${QKV_DIR}/conflict/modeling_codegen.py "mp_num = 8\nself.mp_num = 4\n")

# --qkv-groups states the layout the file does not: parity with the reference again (TP 2).
add_test(NAME qkv_groups_flag_parity_tp2
         COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np 2 --mpiexec ${TPGEN_MPIEXEC}
                 --fixture ${QKV_DIR}/unknown -- --backend cpu --threads 1 --qkv-groups 8)
set_tests_properties(qkv_groups_flag_parity_tp2 PROPERTIES LABELS "parity;qkv_groups;mpi" TIMEOUT 300)

add_test(NAME qkv_groups_inline_parity_tp2
         COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np 2 --mpiexec ${TPGEN_MPIEXEC}
                 --fixture ${QKV_DIR}/inline -- --backend cpu --threads 1)
set_tests_properties(qkv_groups_inline_parity_tp2 PROPERTIES LABELS "parity;qkv_groups;mpi" TIMEOUT 300)

# The refusals (tests/errors.cmake's error_test: one clear message, every rank exits 1).
error_test(remote_code_unknown "remote code .*unknown/modeling_codegen.py that tpgen cannot identify.*--qkv-groups N"
           ARGS ${QKV_GEN} --model ${QKV_DIR}/unknown)
error_test(remote_code_conflict "conflict/modeling_codegen.py that tpgen cannot identify \\(conflicting"
           ARGS ${QKV_GEN} --model ${QKV_DIR}/conflict)
error_test(remote_code_missing "remote code .*missing/modeling_codegen.py, which cannot be read.*--qkv-groups N"
           ARGS ${QKV_GEN} --model ${QKV_DIR}/missing)
error_test(qkv_groups_disagree "--qkv-groups 4 disagrees with the checkpoint: .*modeling_codegen.py has mp_num = 8"
           ARGS ${QKV_GEN} --model ${QKV_FIX} --qkv-groups 4)
error_test(qkv_groups_heads "n_head 4 is not a multiple of 8, the qkv_proj group count \\(from --qkv-groups\\)"
           ARGS ${QKV_GEN} --model ${ERR_TINY} --qkv-groups 8)
error_test(codegen2_tp3 "TP=3 .*n_head=16.*valid TP sizes: 1, 2, 4, 8, 16" NP 3 ARGS ${QKV_GEN} --model ${QKV_FIX})
foreach(t remote_code_unknown remote_code_conflict remote_code_missing qkv_groups_disagree qkv_groups_heads codegen2_tp3)
  set_tests_properties(errors_${t} PROPERTIES LABELS "errors;qkv_groups;mpi")
endforeach()
