#!/usr/bin/env bash
# Layering check: files in DIR may include project headers only from the layers ALLOWED (a comma
# list; DIR's own headers, by bare name or by path, are always allowed). A layer is a folder of the
# source tree (engine/model, launcher/server, util ...); LAYERS (a comma list of every layer) says
# which layer a header belongs to: the longest layer its path starts with, so launcher/ does not
# own launcher/server/, and DIR's files in a nested layer are that layer's, not DIR's. A quoted
# include is resolved as the compiler does (the including file's folder, then the source root, then
# engine/, the second include root), so "../model/x.h", "model/x.h" and "engine/model/x.h" are all
# caught. Prints every offending line; exit 1 if any.
#   check_includes.sh SRC_ROOT DIR ALLOWED LAYERS
set -u
root=$1 dir=$2 allowed=$3 layers=$4
[ -d "$root/$dir" ] || { echo "check_includes: no folder $root/$dir" >&2; exit 2; }
IFS=, read -r -a ok <<<"$allowed"
IFS=, read -r -a all <<<"$layers"
ok+=("$dir")
layer_of() { # PATH (relative to the root) -> its layer, or . for the root's own files
  local best=. l
  for l in "${all[@]}"; do
    case "$1" in "$l"/*) [ ${#l} -gt ${#best} ] || [ "$best" = . ] && best=$l ;; esac
  done
  echo "$best"
}
bad=0 n=0
while IFS= read -r -d '' f; do
  rel=${f#"$root"/}
  [ "$(layer_of "$rel")" = "$dir" ] || continue # a file of a nested layer: checked as that layer
  while IFS= read -r hit; do
    line=${hit%%:*} inc=$(sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$hit")
    n=$((n + 1))
    here=$(dirname "$f")
    if [ -e "$here/$inc" ]; then target=$(realpath -m --relative-to="$root" "$here/$inc")
    elif [ -e "$root/$inc" ] || [ ! -e "$root/engine/$inc" ]; then target=$(realpath -m --relative-to="$root" "$root/$inc")
    else target=$(realpath -m --relative-to="$root" "$root/engine/$inc"); fi
    owner=$(layer_of "$target")
    good=0
    for a in "${ok[@]}"; do [ "$owner" = "$a" ] && good=1; done
    if [ $good = 0 ]; then
      echo "$rel:$line: includes \"$inc\" ($target): $dir/ may include only ${ok[*]} headers" >&2
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find "$root/$dir" \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) -print0)
[ $bad = 0 ] && echo "check_includes: $dir/: $n project includes, all from ${ok[*]}"
exit $bad
