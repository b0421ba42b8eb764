/* Hub names for --model, resolved offline in the local Hugging Face cache (never downloads).
 *
 * `--model Salesforce/codegen-16B-mono` that is not an existing path is looked up as
 * transformers does: the cache is $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; the repository is
 * models--Salesforce--codegen-16B-mono; refs/<revision> (default main) holds the commit whose
 * snapshot directory, snapshots/<commit>, has the files (symlinks into blobs/, followed like
 * any path). A revision may also be a commit with a snapshot directory.
 */
#ifndef TPGEN_HUB_H
#define TPGEN_HUB_H

#include <stddef.h>

/* model: a path, or ORG/NAME. revision: NULL for main. Returns a malloc'd directory (model
 * itself when it is an existing path or not a hub name), or NULL with a message in err that
 * lists where it looked and the `huggingface-cli download` command that would fetch it. */
char *tp_hub_resolve(const char *model, const char *revision, char *err, size_t err_size);

/* 1 when s has the form of a hub name: ORG/NAME, letters, digits, '-', '_', '.'. */
int tp_hub_is_name(const char *s);

#endif
