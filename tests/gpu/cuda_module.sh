#!/usr/bin/env bash
# The CUDA module (kernels/cuda_module.h) on any machine, GPU or not.
#
# usage: cuda_module.sh loads COMMAND...  COMMAND runs tpgen with --backend cuda: it must pass (a
#                                         GPU) or stop at "no CUDA GPU", which job.c reaches only
#                                         after the module loaded with every symbol resolved, and
#                                         (with --verbose) name the module it loaded
#        cuda_module.sh no-driver TPGEN   without a CUDA driver, `tpgen info` says 0 devices and
#                                         never loads the module (no warning even when
#                                         TPGEN_CUDA_MODULE points nowhere); SKIPPED (77) with a driver
set -u
mode=$1; shift
case $mode in
    loads)
        out=$("$@" 2>&1) && exit 0
        echo "$out"
        grep -q 'error: --backend cuda: no CUDA GPU is visible on this node' <<< "$out" &&
            grep -q '^cuda module: /.*/libtpgen-cuda.so$' <<< "$out" ;;
    no-driver)
        if ldconfig -p | grep -q 'libcuda\.so\.1 '; then echo "SKIPPED: a CUDA driver is installed"; exit 77; fi
        out=$("$1" info 2>&1) || { echo "$out"; exit 1; }
        echo "$out"
        grep -q '^cuda devices: 0$' <<< "$out" && ! grep -q warning <<< "$out" ;;
    *) echo "usage: cuda_module.sh loads|no-driver ..." >&2; exit 2 ;;
esac
