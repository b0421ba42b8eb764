#!/usr/bin/env bash
# The CUDA module (kernels/cuda_module.h) on any machine, GPU or not.
#
# usage: cuda_module.sh loads COMMAND...  COMMAND runs tpgen with --backend cuda --verbose: it
#                                         must name the module it loaded (every symbol resolved,
#                                         entry points and interface hash checked) and then pass
#                                         (a GPU) or stop at "no CUDA GPU"
#        cuda_module.sh no-driver TPGEN   without a CUDA driver, `tpgen info` says 0 devices and
#                                         never loads the module (no warning even when
#                                         TPGEN_CUDA_MODULE points nowhere); SKIPPED (77) with a driver
set -u
mode=$1; shift
case $mode in
    loads)
        out=$("$@" 2>&1)
        rc=$?
        echo "$out"
        grep -q '^cuda module: /.*/libtpgen-cuda.so$' <<< "$out" || exit 1
        [ $rc -eq 0 ] || grep -q 'error: --backend cuda: no CUDA GPU is visible on this node' <<< "$out" ;;
    no-driver)
        # the driver as tpgen looks for it: dlopen("libcuda.so.1"), LD_LIBRARY_PATH included
        if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2> /dev/null; then
            echo "SKIPPED: a CUDA driver is installed"; exit 77
        fi
        out=$("$1" info 2>&1) || { echo "$out"; exit 1; }
        echo "$out"
        grep -q '^cuda devices: 0$' <<< "$out" && ! grep -q 'a CUDA driver is installed but' <<< "$out" ;;
    *) echo "usage: cuda_module.sh loads|no-driver ..." >&2; exit 2 ;;
esac
