#!/usr/bin/env bash
# No two files use each other: for every pair of object files A, B (from the static libraries and
# object files given), it fails when A calls or reads a symbol B defines and B one that A
# defines, and names both files and one symbol each way. Static (file-local) symbols do not
# count; a header's inline code is compiled into its user, so it does not either.
#   check_cycles.sh LIB.a|OBJ.o ...
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in "$@"; do
  [ -e "$f" ] || { echo "check_cycles: no file $f" >&2; exit 2; }
  # nm -A: "archive:member: ... T symbol" or "object: ... T symbol"
  nm -A --defined-only --extern-only "$f" 2>/dev/null | awk '$(NF-1) ~ /^[TDBRVWGS]$/ {sub(/:[^:]*$/, "", $1); print $1, $NF}' >>"$tmp/def"
  nm -A --undefined-only "$f" 2>/dev/null | awk '{sub(/:[^:]*$/, "", $1); print $1, $NF}' >>"$tmp/use"
done
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
