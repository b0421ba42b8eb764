#!/usr/bin/env bash
# No two files use each other: for every pair of object files A, B (from the static libraries and
# object files given), it fails when A calls or reads a symbol B defines and B one that A
# defines, and names both files and one symbol each way. Static (file-local) symbols do not
# count; a header's inline code is compiled into its user, so it does not either. A symbol
# defined as an ifunc (nm type i: the target_clones of CPU_SIMD_CLONES) counts like any other.
# With --src ROOT, a file that includes B.h, where B.c (or B.cu) sits beside B.h, uses B.c
# too (B.h is B.c's interface: cpu_int8_amx.c including cpu_int8.h uses cpu_int8.c), so a
# kernel file and the file that calls it cannot share one header named after either.
# Files are named by their base names (unique in the tree).
#   check_cycles.sh [--src ROOT] LIB.a|OBJ.o ...
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
src=""
if [ "${1:-}" = --src ]; then src=$2; shift 2; fi
for f in "$@"; do
  [ -e "$f" ] || { echo "check_cycles: no file $f" >&2; exit 2; }
  # nm -A: "archive:member: ... T symbol" or "object: ... T symbol"
  nm -A --defined-only --extern-only "$f" 2>/dev/null | awk '$(NF-1) ~ /^[TDBRVWGSi]$/ {sub(/:[^:]*$/, "", $1); sub(/.*[\/:]/, "", $1); print $1, $NF}' >>"$tmp/def"
  nm -A --undefined-only "$f" 2>/dev/null | awk '{sub(/:[^:]*$/, "", $1); sub(/.*[\/:]/, "", $1); print $1, $NF}' >>"$tmp/use"
done
# include edges as uses of a made-up symbol "B.h" that B.c.o defines
if [ -n "$src" ]; then
  while IFS= read -r h; do
    d=$(dirname "$h") b=$(basename "$h" .h)
    for c in "$d/$b.c" "$d/$b.cu"; do [ -f "$c" ] && echo "$(basename "$c").o $b.h"; done
  done < <(find "$src" -path "$src/build*" -prune -o -path "$src/tests" -prune -o -name '*.h' -print) >>"$tmp/def"
  while IFS= read -r c; do
    grep -o '^#include "[^"]*\.h"' "$c" | sed 's#.*/##; s#^\#include "##; s#"$##' |
      awk -v f="$(basename "$c").o" '{print f, $0}'
  done < <(find "$src" -path "$src/build*" -prune -o -path "$src/tests" -prune -o \( -name '*.c' -o -name '*.cu' \) -print) >>"$tmp/use"
fi
# who uses whom: "user definer symbol", one line per (user, definer) pair
awk 'NR == FNR { d[$2] = $1; next } ($2 in d) && d[$2] != $1 && !seen[$1 " " d[$2]]++ { print $1, d[$2], $2 }' \
  "$tmp/def" "$tmp/use" >"$tmp/edges"
awk '{ e[$1 " " $2] = $3 } END { n = 0; for (k in e) { split(k, p, " "); r = p[2] " " p[1];
       if ((r in e) && p[1] < p[2]) { printf "%s uses %s (%s) and %s uses %s (%s)\n", p[1], p[2], e[k], p[2], p[1], e[r]; n++ } }
       exit n > 0 }' "$tmp/edges" >"$tmp/pairs"
rc=$?
sed 's#[^ ]*/##g' "$tmp/pairs" >&2
[ $rc = 0 ] && echo "check_cycles: $(wc -l <"$tmp/edges") file-to-file uses, no two files use each other"
exit $rc
