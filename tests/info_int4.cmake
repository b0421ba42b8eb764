# `tpgen info --weights int4` (launcher/cmd_info.c): the bytes per rank with the GEMM weights in
# int4 (kernels/common/tp_quant4.h tp_q4_read_bytes, groups of 128: N K / 2 + N (K / 128) 5 bytes)
# and lm_head in int8 (V E + 4 V), against sums done by hand; the TP sizes whose row-parallel
# matrices' K a rank is not a multiple of 128 are not valid.
#
# CodeGen-16B, TP 1, per layer (E 6144, 24 heads of 256, MLP 24576): qkv 61,046,784 + o 20,348,928
# + fc_in 81,395,712 + fc_out 81,395,712 = 244,187,136; x 34 layers + lm_head 314,777,600
# = 8,617,140,224 bytes = 8.03 GiB read per step. Weights per rank: 16,032,155,648 parameters x 4
# (f32) - 15,716,057,088 matrix elements x 4 + 8,617,140,224 = 9.20 GiB. Every TP 1..8 is valid
# (o's K 6144 / TP and fc_out's 24576 / TP are multiples of 128).
add_test(NAME info_int4_codegen16b COMMAND $<TARGET_FILE:tpgen> info --model ${CMAKE_SOURCE_DIR}/configs/codegen-16B.json
         --weights int4 --dtype f32 --memory 80)
set_tests_properties(info_int4_codegen16b PROPERTIES LABELS "int4;launcher" TIMEOUT 30
  PASS_REGULAR_EXPRESSION "in int4, groups of 128 along K.*lm_head in int8 with an f32 scale per row.*\n  1 +9\\.20 GiB +1671168 +45487\n.*\n  8 +2\\.18 GiB .*per token at batch 1\\): TP 1 8\\.03 GiB, TP 2 4\\.01 GiB, TP 4 2\\.01 GiB, TP 8 1\\.00 GiB")
# CodeGen2.5-7B (E 4096, 32 heads of 128, MLP 11008, SiLU-gated), TP 1: qkv 27,131,904 + o 9,043,968
# + gate/up 48,611,328 + down 24,305,664 = 109,092,864; x 32 + lm_head 209,920,000 = 3.45 GiB. TP 2:
# 54,546,432 x 32 + 104,960,000 = 1.72 GiB. TP 4 and 8 cut down_proj's groups (11008 / 4 = 2752 =
# 21.5 groups of 128): not valid.
add_test(NAME info_int4_codegen25_7b COMMAND $<TARGET_FILE:tpgen> info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json
         --weights int4 --dtype f32 --memory 80)
set_tests_properties(info_int4_codegen25_7b PROPERTIES LABELS "int4;launcher" TIMEOUT 30
  PASS_REGULAR_EXPRESSION "\n  1 +4\\.23 GiB .*\n  2 +2\\.51 GiB .*\n  4 +not valid for --weights int4: the MLP's output matrix: K = 2752 a rank, not a multiple of the 128-wide groups\n  8 +not valid for --weights int4: the MLP's output matrix: K = 1376 a rank.*TP 1 3\\.45 GiB, TP 2 1\\.72 GiB, TP 4 not valid, TP 8 not valid")
# a --weights value other than int8 or int4: exit 2 naming the flag and the value
tpgen_expect_error(info_int4_bad_weights "--weights must be int8 or int4, got \"int3\"" NP 0 LABELS "int4;errors"
                   DRIVER_FLAGS --status 2 TIMEOUT 30
                   ARGS info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json --weights int3)
# --group-size 64 (as `tpgen --weights int4 --group-size 64`): CodeGen2.5-7B, TP 1: qkv 29,097,984 + o
# 9,699,328 + gate/up 52,133,888 + down 26,066,944 = 116,998,144; x 32 + lm_head 209,920,000 = 3.68 GiB.
# TP 4 (down_proj's K 2752 = 43 groups of 64): 29,249,536 x 32 + 52,480,000 = 942.7 MiB; TP 8
# (1376 = 21.5 groups) not valid.
add_test(NAME info_int4_group64 COMMAND $<TARGET_FILE:tpgen> info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json
         --weights int4 --group-size 64 --dtype f32 --memory 80)
set_tests_properties(info_int4_group64 PROPERTIES LABELS "int4;launcher" TIMEOUT 30
  PASS_REGULAR_EXPRESSION "groups of 64 along K.*\n  8 +not valid for --weights int4: the MLP's output matrix: K = 1376 a rank, not a multiple of the 64-wide groups.*TP 1 3\\.68 GiB, TP 2 1\\.84 GiB, TP 4 942\\.7 MiB, TP 8 not valid")
tpgen_expect_error(info_int4_group_without_int4 "--group-size is for --weights int4" NP 0 LABELS "int4;errors"
                   DRIVER_FLAGS --status 2 TIMEOUT 30
                   ARGS info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json --weights int8 --group-size 64)
tpgen_expect_error(info_int4_group_not_32 "--group-size 48: must be a multiple of 32" NP 0 LABELS "int4;errors"
                   DRIVER_FLAGS --status 2 TIMEOUT 30
                   ARGS info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json --weights int4 --group-size 48)
# the same count from the engine: info's int4 GEMM bytes per rank = `tpgen bench --weights int4`'s
# weight bytes, TP 1 and 2, groups of 128 and 64, lm_head int8 and int4 (--lm-head), on a tiny LLaMA shape
add_test(NAME info_int4_vs_bench
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launcher/info_int4_vs_bench.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${CMAKE_CURRENT_BINARY_DIR}/info_int4_vs_bench)
set_tests_properties(info_int4_vs_bench PROPERTIES LABELS "int4;launcher;mpi" TIMEOUT 120)
tpgen_expect_error(info_int4_lm_head_without_int4 "--lm-head is for --weights int4" NP 0 LABELS "int4;errors"
                   DRIVER_FLAGS --status 2 TIMEOUT 30
                   ARGS info --model ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json --weights int8 --lm-head int4)
