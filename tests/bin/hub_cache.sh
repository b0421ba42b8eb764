#!/usr/bin/env bash
# Hub names resolved offline in an HF cache laid out as huggingface_hub writes it (made here):
#   HF_HOME/hub/models--TestOrg--tiny-codegen/{blobs/<hash>, refs/main, refs/v2,
#   snapshots/<commit>/<file> -> ../../blobs/<hash>}
# main: the tiny-f32 .bin fixture with the tokenizer files; v2: the sharded rot-full-bf16 one.
# usage: hub_cache.sh TPGEN MPIEXEC DATA_DIR TMPDIR
set -u
tpgen=$1 mpiexec=$2 data=$3 tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
repo=$tmp/hf/hub/models--TestOrg--tiny-codegen
c1=0123456789abcdef0123456789abcdef01234567
c2=89abcdef0123456789abcdef0123456789abcdef
mkdir -p "$repo/blobs" "$repo/refs" "$repo/snapshots/$c1" "$repo/snapshots/$c2" || exit 1
add() { # commit file
    local h
    h=$(sha256sum "$2" | cut -c1-64)
    cp "$2" "$repo/blobs/$h"
    ln -s "../../blobs/$h" "$repo/snapshots/$1/$(basename "$2")"
}
for f in "$data"/bin/tiny-f32/config.json "$data"/bin/tiny-f32/pytorch_model.bin "$data"/tokenizer/codegen/*; do add $c1 "$f"; done
for f in "$data"/bin/rot-full-bf16/config.json "$data"/bin/rot-full-bf16/pytorch_model*; do add $c2 "$f"; done
printf %s $c1 > "$repo/refs/main"
printf '%s\n' $c2 > "$repo/refs/v2"

fail=0
check() { # description, command status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}
mpi() { "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$@"; }
score=(score --ids 0,5,17,9,33,2,8,1 --logprobs 5 --json --backend cpu --threads 1)
unset HF_HUB_CACHE
export HF_HOME=$tmp/hf

mpi "$tpgen" "${score[@]}" --model "$data/tiny-f32" > "$tmp/direct.out" 2>/dev/null
mpi "$tpgen" "${score[@]}" --model TestOrg/tiny-codegen > "$tmp/hub.out" 2> "$tmp/hub.err"
cmp -s "$tmp/direct.out" "$tmp/hub.out" && [ -s "$tmp/hub.out" ]
check "score --model TestOrg/tiny-codegen (refs/main, symlinks into blobs/) = the fixture on 2 ranks" $?
grep -q "checkpoint: $repo/snapshots/$c1/pytorch_model.bin (torch.save zip" "$tmp/hub.err"
check "it read snapshots/<refs/main>/pytorch_model.bin" $?

mpi "$tpgen" "${score[@]}" --model "$data/rot-full-bf16" > "$tmp/direct2.out" 2>/dev/null
mpi "$tpgen" "${score[@]}" --model TestOrg/tiny-codegen --revision v2 > "$tmp/hub2.out" 2>/dev/null
cmp -s "$tmp/direct2.out" "$tmp/hub2.out" && [ -s "$tmp/hub2.out" ] && ! cmp -s "$tmp/hub.out" "$tmp/hub2.out"
check "--revision v2 (a sharded .bin snapshot) = its fixture" $?
mpi "$tpgen" "${score[@]}" --model TestOrg/tiny-codegen --revision $c1 > "$tmp/hub3.out" 2>/dev/null
cmp -s "$tmp/direct.out" "$tmp/hub3.out"
check "--revision <commit> picks snapshots/<commit>" $?

"$tpgen" tokenize --model "$data/tokenizer/codegen" --text "def hello(): return 'hub'" > "$tmp/tok_direct.out"
"$tpgen" tokenize --model TestOrg/tiny-codegen --text "def hello(): return 'hub'" > "$tmp/tok_hub.out"
cmp -s "$tmp/tok_direct.out" "$tmp/tok_hub.out" && [ -s "$tmp/tok_hub.out" ]
check "tokenize --model TestOrg/tiny-codegen" $?

HF_HOME=/nonexistent HF_HUB_CACHE=$tmp/hf/hub mpi "$tpgen" "${score[@]}" --model TestOrg/tiny-codegen > "$tmp/hub4.out" 2>/dev/null
cmp -s "$tmp/direct.out" "$tmp/hub4.out"
check "HF_HUB_CACHE comes before HF_HOME" $?

"$tpgen" info --model TestOrg/tiny-codegen > "$tmp/info.out" 2>&1
grep -q "pytorch_model.bin (torch.save zip" "$tmp/info.out"
check "info --model TestOrg/tiny-codegen" $?

"$tpgen" "${score[@]}" --model TestOrg/tiny-codegen --revision nope > /dev/null 2> "$tmp/err1"
[ $? -ne 0 ] && grep -q "revision nope is not" "$tmp/err1" && grep -q "huggingface-cli download TestOrg/tiny-codegen --revision nope" "$tmp/err1"
check "an unknown revision is an error naming it and the download command" $?
"$tpgen" tokenize --model TestOrg/other --text x > /dev/null 2> "$tmp/err2"
[ $? -ne 0 ] && grep -q "looked for $tmp/hf/hub/models--TestOrg--other" "$tmp/err2" && grep -q "huggingface-cli download TestOrg/other" "$tmp/err2"
check "tokenize: a name not in the cache lists where it looked" $?
[ $fail -ne 0 ] && { cat "$tmp"/err1 "$tmp"/err2; }
exit $fail
