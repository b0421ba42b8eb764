/* torch.save checkpoint reader: see torch_bin.h. */
#include "torch_bin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_path.h"
#include "tensor_index.h"
#include "unpickle.h"
#include "util/log.h"
#include "zipfile.h"

typedef struct {
    char *path;
    uint8_t *map; /* [size] our mmap of the file, or NULL for a caller's buffer */
    size_t size;
    tp_zip zip;
} bin_file;

typedef struct {
    char *name;
    tp_store_type type;
} skipped_tensor;

struct tp_bin_model {
    bin_file *files; /* [n_files] */
    size_t n_files, cap_files;
    tp_tensor_table table;   /* file by file, each file's tensors in data order */
    skipped_tensor *skipped; /* [n_skipped] tensors of types tpgen does not load */
    size_t n_skipped, cap_skipped;
    int zip64;
};

static const char *dims_str(const int64_t *d, int n, char *buf, size_t size) {
    return tp_st_shape_str(d, n, buf, size);
}

/* Checks one pickled tensor against its storage record and appends it (or sets it aside when
 * its type is not loaded). */
static int add_tensor(tp_bin_model *m, const bin_file *f, const char *prefix, const tp_pickle_tensor *pt, char *err,
                      size_t err_size) {
    tp_dtype dt;
    int int32 = 0;
    switch (pt->type) {
    case TP_STORE_I32: dt = TP_F32, int32 = 1; break; /* 4-bit checkpoints' packed tensors (safetensors.h) */
    case TP_STORE_F32: dt = TP_F32; break;
    case TP_STORE_F16: dt = TP_F16; break;
    case TP_STORE_BF16: dt = TP_BF16; break;
    default:
        if (m->n_skipped == m->cap_skipped)
            m->skipped = tp_realloc(m->skipped,
                                    (m->cap_skipped = m->cap_skipped ? 2 * m->cap_skipped : 16) * sizeof *m->skipped);
        m->skipped[m->n_skipped++] = (skipped_tensor){tp_strdup(pt->name), pt->type};
        return 0;
    }
    const char *file = f->path, *name = pt->name;
    char rec_name[512], sh[200], st[200];
    snprintf(rec_name, sizeof rec_name, "%s/data/%s", prefix, pt->storage_key);
    const tp_zip_entry *rec = tp_zip_find(&f->zip, rec_name);
    if (!rec)
        return tp_set_err(err, err_size, "%s: tensor %s: its storage record %s is missing from the archive", file, name,
                    rec_name);
    uint64_t es = tp_store_type_size(pt->type), store_bytes;
    if (__builtin_mul_overflow((uint64_t)pt->storage_numel, es, &store_bytes) || store_bytes > rec->size)
        return tp_set_err(err, err_size,
                    "%s: tensor %s: storage %s should hold %lld elements of %s (%llu bytes) but the "
                    "record has %llu bytes (truncated or corrupt)",
                    file, name, rec_name, (long long)pt->storage_numel, tp_store_type_name(pt->type),
                    (unsigned long long)(pt->storage_numel * es), (unsigned long long)rec->size);
    /* Contiguous row-major: stride[i] = prod(shape[i+1..]) (any stride for a dim of size 1). */
    uint64_t numel = 1, expect = 1;
    int contiguous = 1;
    for (int i = pt->ndim; i-- > 0;) {
        if (pt->shape[i] < 0)
            return tp_set_err(err, err_size, "%s: tensor %s: shape %s has a negative size", file, name,
                        dims_str(pt->shape, pt->ndim, sh, sizeof sh));
        if (pt->shape[i] != 1 && (uint64_t)pt->stride[i] != expect) contiguous = 0;
        if (__builtin_mul_overflow(expect, (uint64_t)pt->shape[i], &expect) ||
            __builtin_mul_overflow(numel, (uint64_t)pt->shape[i], &numel))
            return tp_set_err(err, err_size, "%s: tensor %s: shape %s is too large", file, name,
                        dims_str(pt->shape, pt->ndim, sh, sizeof sh));
    }
    if (!contiguous && numel)
        return tp_set_err(err, err_size,
                    "%s: tensor %s: strides %s for shape %s are not contiguous; tpgen reads only "
                    "contiguous tensors (save tensor.contiguous())",
                    file, name, dims_str(pt->stride, pt->ndim, st, sizeof st),
                    dims_str(pt->shape, pt->ndim, sh, sizeof sh));
    if ((uint64_t)pt->offset > (uint64_t)pt->storage_numel ||
        numel > (uint64_t)pt->storage_numel - (uint64_t)pt->offset)
        return tp_set_err(err, err_size, "%s: tensor %s: elements %lld..%llu of a storage of %lld (%s) are out of range",
                    file, name, (long long)pt->offset, (unsigned long long)(pt->offset + numel),
                    (long long)pt->storage_numel, rec_name);
    tp_st_tensor *t = tp_tensor_table_reserve(&m->table);
    t->name = tp_strdup(name);
    t->dtype = dt;
    t->int32 = int32;
    t->ndim = pt->ndim;
    memcpy(t->shape, pt->shape, sizeof pt->shape[0] * (size_t)pt->ndim);
    t->data = rec->data + (size_t)pt->offset * es;
    t->nbytes = (size_t)(numel * es);
    t->file = f->path;
    tp_tensor_table_push(&m->table);
    return 0;
}

static int by_data(const void *a, const void *b) {
    const tp_st_tensor *x = a, *y = b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Parses the archive of f (already mapped) and appends its tensors. */
static int parse_archive(tp_bin_model *m, bin_file *f, char *err, size_t err_size) {
    const uint8_t *b = f->map;
    const char *path = f->path;
    if (f->size == 0) return tp_set_err(err, err_size, "%s: empty file", path);
    if (f->size >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return tp_set_err(err, err_size,
                    "%s: a torch checkpoint in the legacy format of torch < 1.6 (a bare pickle, not a "
                    "zip archive); tpgen never runs such files: re-save it with torch >= 1.6 "
                    "(torch.save(torch.load(f), f)) or convert it to safetensors",
                    path);
    if (f->size < 4 || memcmp(b, "PK\003\004", 4) != 0)
        return tp_set_err(err, err_size,
                    "%s: not a torch.save zip archive (it starts with %02x %02x %02x %02x, not PK\\3\\4)", path, b[0],
                    f->size > 1 ? b[1] : 0, f->size > 2 ? b[2] : 0, f->size > 3 ? b[3] : 0);
    if (tp_zip_open(&f->zip, b, f->size, path, err, err_size)) return -1;
    m->zip64 |= f->zip.zip64;
    const tp_zip_entry *pkl = NULL;
    for (size_t i = 0; i < f->zip.n; i++) {
        const char *n = f->zip.entries[i].name, *slash = strchr(n, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0) {
            if (pkl)
                return tp_set_err(err, err_size, "%s: two data.pkl records (%s, %s): not one torch.save checkpoint", path,
                            pkl->name, n);
            pkl = &f->zip.entries[i];
        }
    }
    if (!pkl)
        return tp_set_err(err, err_size, "%s: a zip archive without a <name>/data.pkl record: not a torch.save checkpoint",
                    path);
    char prefix[256], rec[300];
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strchr(pkl->name, '/') - pkl->name), pkl->name);
    snprintf(rec, sizeof rec, "%s/byteorder", prefix);
    const tp_zip_entry *bo = tp_zip_find(&f->zip, rec);
    if (bo && !(bo->size == 6 && memcmp(bo->data, "little", 6) == 0))
        return tp_set_err(err, err_size, "%s: byteorder record is \"%.*s\"; tpgen reads little-endian checkpoints only", path,
                    (int)(bo->size < 16 ? bo->size : 16), (const char *)bo->data);
    tp_pickle_dict d;
    if (tp_unpickle_state_dict(pkl->data, (size_t)pkl->size, path, &d, err, err_size)) return -1;
    size_t first = m->table.n;
    int rc = 0;
    for (size_t i = 0; i < d.n && !rc; i++) rc = add_tensor(m, f, prefix, &d.tensors[i], err, err_size);
    tp_pickle_dict_free(&d);
    /* no tensors loaded (an empty dict, or only types tpgen skips): tensors may be NULL */
    if (!rc && m->table.n > first)
        qsort(m->table.tensors + first, m->table.n - first, sizeof *m->table.tensors, by_data);
    return rc ? rc : tp_tensor_table_index(&m->table, first, err, err_size);
}

static bin_file *new_file(tp_bin_model *m, const char *path) {
    if (m->n_files == m->cap_files)
        m->files = tp_realloc(m->files, (m->cap_files = m->cap_files ? 2 * m->cap_files : 8) * sizeof *m->files);
    bin_file *f = &m->files[m->n_files++];
    memset(f, 0, sizeof *f);
    f->path = tp_strdup(path);
    return f;
}

/* mmaps path and parses it. why: how the file was named (for the open error), or NULL. */
static int load_file(tp_bin_model *m, const char *path, const char *why, char *err, size_t err_size) {
    bin_file *f = new_file(m, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tp_set_err(err, err_size, "%s%s%s: %s", path, why ? " " : "", why ? why : "", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tp_set_err(err, err_size, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tp_set_err(err, err_size, "%s: not a regular file", path);
    }
    f->size = (size_t)st.st_size;
    if (f->size) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            f->size = 0;
            return tp_set_err(err, err_size, "%s: mmap of %lld bytes failed: %s", path, (long long)st.st_size, strerror(e));
        }
        f->map = p;
    }
    close(fd); /* the mapping stays valid */
    return parse_archive(m, f, err, err_size);
}

/* ---- index + shards (tensor_index.h) ---- */

static int load_shard(void *m, const char *path, const char *why, char *err, size_t err_size) {
    return load_file(m, path, why, err, err_size);
}

static const char *skipped_type(const void *m, const char *name) { return tp_bin_unsupported(m, name); }

static int load_index(tp_bin_model *m, const char *index, const char *dir, char *err, size_t err_size) {
    return tp_tensor_index_load(index, dir, m, load_shard, skipped_type, &m->table, err, err_size);
}

/* ---- public ---- */

tp_bin_model *tp_bin_open(const char *path, char *err, size_t err_size) {
    tp_bin_model *m = tp_calloc(1, sizeof *m);
    tp_tensor_table_init(&m->table);
    char *dir, *file = tp_ckpt_resolve(path, "pytorch_model.bin", "pytorch_model.bin.index.json", &dir, err, err_size);
    int rc = !file ? -1 : dir ? load_index(m, file, dir, err, err_size) : load_file(m, file, NULL, err, err_size);
    free(file);
    free(dir);
    if (rc) {
        tp_bin_close(m);
        return NULL;
    }
    return m;
}

tp_bin_model *tp_bin_open_buffer(const uint8_t *buf, size_t size, const char *what, char *err, size_t err_size) {
    tp_bin_model *m = tp_calloc(1, sizeof *m);
    tp_tensor_table_init(&m->table);
    bin_file *f = new_file(m, what);
    f->map = (uint8_t *)buf;
    f->size = size;
    int rc = parse_archive(m, f, err, err_size);
    f->map = NULL; /* not ours to unmap */
    if (rc) {
        tp_bin_close(m);
        return NULL;
    }
    return m;
}

const tp_st_tensor *tp_bin_find(const tp_bin_model *m, const char *name) {
    return tp_tensor_table_find(&m->table, name);
}

const char *tp_bin_unsupported(const tp_bin_model *m, const char *name) {
    for (size_t i = 0; i < m->n_skipped; i++)
        if (strcmp(m->skipped[i].name, name) == 0) return tp_store_type_name(m->skipped[i].type);
    return NULL;
}

size_t tp_bin_count(const tp_bin_model *m) { return m->table.n; }
const tp_st_tensor *tp_bin_at(const tp_bin_model *m, size_t i) { return i < m->table.n ? &m->table.tensors[i] : NULL; }
size_t tp_bin_total_bytes(const tp_bin_model *m) { return m->table.total_bytes; }
size_t tp_bin_file_count(const tp_bin_model *m) { return m->n_files; }
int tp_bin_zip64(const tp_bin_model *m) { return m->zip64; }

void tp_bin_close(tp_bin_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_files; i++) {
        if (m->files[i].map) munmap(m->files[i].map, m->files[i].size); /* cannot fail for a mapping we made */
        tp_zip_free(&m->files[i].zip);
        free(m->files[i].path);
    }
    tp_tensor_table_free(&m->table);
    for (size_t i = 0; i < m->n_skipped; i++) free(m->skipped[i].name);
    free(m->files);
    free(m->skipped);
    free(m);
}
