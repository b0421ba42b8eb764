#!/usr/bin/env bash
# Checkpoint load time, torch.save .bin vs safetensors, against the disk's sequential read speed,
# all measured in one run. Writes a random checkpoint of a real CodeGen shape (numpy; then torch
# for the .bin copy) to WORK, outside the repository.
#
#   bash tools/bench/bench_load.sh [CONFIG] [WORK]      (defaults: configs/codegen-350M.json, /tmp/tpgen_bench_load)
#   env: TPGEN=build/bin/tpgen MPIEXEC=mpirun RUNS=3
#
# Cold runs evict the checkpoint's pages first (posix_fadvise DONTNEED through dd iflag=nocache;
# fincore confirms 0 resident pages), which is what dropping the page cache does for these files
# without disturbing other work on the machine. Disk speed: dd with O_DIRECT over the
# safetensors file (no page cache). Times are rank 0's: open (headers / pickle) + "loaded in".
set -eu
cfg=${1:-configs/codegen-350M.json}
work=${2:-/tmp/tpgen_bench_load}
tpgen=${TPGEN:-build/bin/tpgen}
mpiexec=${MPIEXEC:-mpirun}
runs=${RUNS:-3}
mkdir -p "$work"
if [ ! -e "$work/st/config.json" ]; then
    python3 tools/fixtures/make_random_model.py "$cfg" "$work/st" --dtype f16 >/dev/null
fi
if [ ! -e "$work/bin/pytorch_model.bin" ]; then
    mkdir -p "$work/bin"
    cp "$work/st/config.json" "$work/bin/"
    # In the file's order (model order, as HF's state_dict is), not load_file's sorted names.
    python3 -c "
import json, struct, sys, torch
from safetensors.torch import load_file
f = open(sys.argv[1], 'rb')
hdr = json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))
hdr.pop('__metadata__', None)
sd = load_file(sys.argv[1])
torch.save({k: sd[k] for k in sorted(hdr, key=lambda k: hdr[k]['data_offsets'][0])}, sys.argv[2])" \
        "$work/st/model.safetensors" "$work/bin/pytorch_model.bin"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
evict() { for f in "$1"/*; do dd if="$f" iflag=nocache count=0 status=none; done; }
resident() { fincore -nb -o RES "$1"/* | awk '{ s += $1 } END { print s + 0 }'; }

st_file=$work/st/model.safetensors
bytes=$(stat -c %s "$st_file")
disk=() cache=()
for i in $(seq "$runs"); do
    t0=$(date +%s.%N); dd if="$st_file" of=/dev/null bs=16M iflag=direct status=none; t1=$(date +%s.%N)
    disk+=("$(awk -v b="$bytes" -v a="$t0" -v c="$t1" 'BEGIN { print b / (c - a) / 1048576 }')")
    cat "$st_file" > /dev/null
    t0=$(date +%s.%N); dd if="$st_file" of=/dev/null bs=16M status=none; t1=$(date +%s.%N)
    cache+=("$(awk -v b="$bytes" -v a="$t0" -v c="$t1" 'BEGIN { print b / (c - a) / 1048576 }')")
done
disk_mbs=$(printf '%s\n' "${disk[@]}" | median)
cache_mbs=$(printf '%s\n' "${cache[@]}" | median)
echo "checkpoint: $cfg, f16, $(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1048576 }') MiB; runs: $runs (medians)"
echo "disk sequential read (O_DIRECT, 16 MiB blocks): $disk_mbs MiB/s; from page cache: $cache_mbs MiB/s"
echo
echo "| format | TP | cache | rank 0 reads MiB | open ms | load s (open + copy) | MiB/s | vs disk |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for tp in 1 2; do
    for fmt in st bin; do
        for mode in cold warm; do
            opens=() totals=() mib=
            for i in $(seq "$runs"); do
                if [ $mode = cold ]; then
                    evict "$work/$fmt"
                    [ "$(resident "$work/$fmt")" = 0 ] || { echo "eviction failed for $work/$fmt" >&2; exit 1; }
                else
                    cat "$work/$fmt"/* > /dev/null
                fi
                err=$("$mpiexec" -np "$tp" "$tpgen" score --model "$work/$fmt" --ids 1,2 --backend cpu --threads 1 2>&1 >/dev/null)
                o=$(sed -n 's/.*opened in \([0-9.]*\) ms.*/\1/p' <<< "$err")
                l=$(sed -n 's/^loaded in \([0-9.]*\) s.*/\1/p' <<< "$err")
                # per rank in the backend's f32; the file holds f16: half of it is read
                mib=$(sed -n 's/^loading checkpoint weights: \([0-9.]*\) MiB per rank.*/\1/p' <<< "$err" | awk '{ print $1 / 2 }')
                [ -n "$o" ] && [ -n "$l" ] || { echo "no timing in: $err" >&2; exit 1; }
                opens+=("$o")
                totals+=("$(awk -v o="$o" -v l="$l" 'BEGIN { print o / 1000 + l }')")
            done
            om=$(printf '%s\n' "${opens[@]}" | median)
            tm=$(printf '%s\n' "${totals[@]}" | median)
            awk -v f=$fmt -v tp=$tp -v m=$mode -v mib="$mib" -v om="$om" -v tm="$tm" -v d="$disk_mbs" 'BEGIN {
                printf "| %s | %d | %s | %.0f | %.1f | %.3f | %.0f | %.2f |\n", f == "st" ? "safetensors" : ".bin (zip)",
                       tp, m, mib, om, tm, mib / tm, mib / tm / d }'
        done
    done
done
