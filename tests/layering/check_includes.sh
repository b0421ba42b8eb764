#!/usr/bin/env bash
# Layering check: files in DIR may include project headers only from the folders ALLOWED (a
# comma list; the folder's own headers, by bare name or DIR/..., are always allowed). A quoted
# include is resolved as the compiler does (the including file's folder, then the source root),
# so "../model/x.h" and "model/x.h" are both caught. Prints every offending line; exit 1 if any.
#   check_includes.sh SRC_ROOT DIR ALLOWED
set -u
root=$1 dir=$2 allowed=$3
[ -d "$root/$dir" ] || { echo "check_includes: no folder $root/$dir" >&2; exit 2; }
IFS=, read -r -a ok <<<"$allowed"
ok+=("$dir")
bad=0 n=0
while IFS= read -r -d '' f; do
  while IFS= read -r hit; do
    line=${hit%%:*} inc=$(sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$hit")
    n=$((n + 1))
    here=$(dirname "$f")
    if [ -e "$here/$inc" ]; then target=$(realpath -m --relative-to="$root" "$here/$inc")
    else target=$(realpath -m --relative-to="$root" "$root/$inc"); fi
    top=${target%%/*}
    [ "$top" = "$target" ] && top=.  # a header at the source root
    good=0
    for a in "${ok[@]}"; do [ "$top" = "$a" ] && good=1; done
    if [ $good = 0 ]; then
      echo "${f#"$root"/}:$line: includes \"$inc\" ($target): $dir/ may include only ${ok[*]} headers" >&2
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find "$root/$dir" \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) -print0)
[ $bad = 0 ] && echo "check_includes: $dir/: $n project includes, all from ${ok[*]}"
exit $bad
