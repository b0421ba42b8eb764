/* File names a checkpoint's index gives (safetensors "weight_map", the .bin index) must stay
 * inside the model directory: an index is data from the internet and must not make tpgen open
 * /etc/... or ../../x. Checked lexically, as HF resolves them (os.path.join(snapshot, name)):
 * a shard that is a symlink inside an HF cache snapshot (to ../../blobs/...) is fine, because
 * the name the index gives stays in the snapshot; only the name is judged, never its target.
 * Also the small path helpers every checkpoint reader uses. */
#ifndef TPGEN_CKPT_PATH_H
#define TPGEN_CKPT_PATH_H

#include <stddef.h>

/* 0 when name is a relative path whose "."/".." components never climb above the directory
 * it is joined to; -1 (absolute, empty, or climbing out) with the reason in err. */
int tp_ckpt_path_check(const char *name, char *err, size_t err_size);

/* "DIR/NAME" (one slash), malloc'd. */
char *tp_ckpt_join(const char *dir, const char *name);
/* The directory of a file path ("." for a bare name, "/" for a file in the root), malloc'd. */
char *tp_ckpt_dir_of(const char *path);
int tp_ckpt_ends_with(const char *s, const char *suffix);
/* What a checkpoint path names, in transformers' order: a directory's `single` file, else its
 * `index` JSON; a file ending in .json is an index, any other file a single file. Returns the file
 * to read (malloc'd), with *index_dir the directory an index's shards are in (malloc'd), or NULL
 * for a single file; NULL with the reason in err when path, or both files of a directory, cannot
 * be found. */
char *tp_ckpt_resolve(const char *path, const char *single, const char *index, char **index_dir, char *err,
                      size_t err_size);

#endif
