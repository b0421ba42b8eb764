/* safetensors reader: mmap each file, validate its whole header, index tensors by name.
 * See safetensors.h for the format and the guarantees. */
#include "safetensors.h"

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
#include "util/json.h"
#include "util/log.h"

typedef struct {
    char *path;
    uint8_t *map;          /* [size] the whole file, read-only */
    size_t size;
    const uint8_t *data;   /* [data_size] the data area, after the header */
    size_t data_size;
    int borrowed;          /* map is the caller's buffer (tp_st_open_memory): not unmapped */
} st_file;

struct tp_st_model {
    st_file *files;        /* [n_files] */
    size_t n_files, cap_files;
    tp_tensor_table table; /* file by file, each file's tensors in offset order */
};

#define TP_ST_DTYPES "F32, F16, BF16 (and I32, the packed tensors of 4-bit checkpoints)"

/* "an array", "a number", ... for messages. */
static const char *a_type(json_type t) {
    static const char *names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[t];
}

int64_t tp_st_numel(const tp_st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *tp_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t used = 0;
    if (!size) return buf;
    buf[0] = 0;
    used += snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- one header entry ---- */

static int parse_dtype(const char *file, const char *name, const json_value *v, tp_dtype *out, int *int32,
                       char *err, size_t err_size) {
    static const char *unsupported[] = {"BOOL", "U8", "I8", "I16", "U16", "U32", "I64", "U64", "F64",
                                        "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};
    if (!v) { tp_set_err(err, err_size, "%s: tensor %s has no \"dtype\"", file, name); return 0; }
    if (v->type != JSON_STRING) {
        tp_set_err(err, err_size, "%s: tensor %s: \"dtype\" is %s, not a string", file, name, a_type(v->type));
        return 0;
    }
    if (strcmp(v->str, "F32") == 0) { *out = TP_F32; return 1; }
    if (strcmp(v->str, "F16") == 0) { *out = TP_F16; return 1; }
    if (strcmp(v->str, "BF16") == 0) { *out = TP_BF16; return 1; }
    if (strcmp(v->str, "I32") == 0) { *out = TP_F32; *int32 = 1; return 1; } /* 4 bytes an element */
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (strcmp(v->str, unsupported[i]) == 0) {
            tp_set_err(err, err_size, "%s: tensor %s: dtype %s is not supported; tpgen reads " TP_ST_DTYPES, file, name,
                   v->str);
            return 0;
        }
    tp_set_err(err, err_size, "%s: tensor %s: unknown dtype \"%.40s\"; tpgen reads " TP_ST_DTYPES, file, name, v->str);
    return 0;
}

static int parse_shape(const char *file, const char *name, const json_value *v, tp_st_tensor *t, char *err,
                       size_t err_size) {
    if (!v) { tp_set_err(err, err_size, "%s: tensor %s has no \"shape\"", file, name); return 0; }
    if (v->type != JSON_ARRAY) {
        tp_set_err(err, err_size, "%s: tensor %s: \"shape\" is %s, not an array", file, name, a_type(v->type));
        return 0;
    }
    if (v->n > TP_ST_MAX_DIMS) {
        tp_set_err(err, err_size, "%s: tensor %s: shape has %zu dims; at most %d are supported", file, name, v->n,
               TP_ST_MAX_DIMS);
        return 0;
    }
    t->ndim = (int)v->n;
    for (size_t i = 0; i < v->n; i++) {
        const json_value *d = &v->items[i];
        if (d->type != JSON_NUMBER || !d->is_integer) {
            tp_set_err(err, err_size, "%s: tensor %s: shape[%zu] is not an integer", file, name, i);
            return 0;
        }
        if (d->integer < 0) {
            tp_set_err(err, err_size, "%s: tensor %s: shape[%zu] = %lld is negative", file, name, i,
                   (long long)d->integer);
            return 0;
        }
        t->shape[i] = d->integer;
    }
    return 1;
}

static int parse_offsets(const char *file, const char *name, const json_value *v, uint64_t *begin, uint64_t *end,
                         char *err, size_t err_size) {
    if (!v) { tp_set_err(err, err_size, "%s: tensor %s has no \"data_offsets\"", file, name); return 0; }
    if (v->type != JSON_ARRAY || v->n != 2 || v->items[0].type != JSON_NUMBER || !v->items[0].is_integer ||
        v->items[1].type != JSON_NUMBER || !v->items[1].is_integer) {
        tp_set_err(err, err_size, "%s: tensor %s: \"data_offsets\" must be [begin, end], two integers", file, name);
        return 0;
    }
    int64_t b = v->items[0].integer, e = v->items[1].integer;
    if (b < 0 || e < 0) {
        tp_set_err(err, err_size, "%s: tensor %s: data_offsets [%lld, %lld] are negative", file, name, (long long)b,
               (long long)e);
        return 0;
    }
    if (b > e) {
        tp_set_err(err, err_size, "%s: tensor %s: data_offsets [%lld, %lld] have begin > end", file, name, (long long)b,
               (long long)e);
        return 0;
    }
    *begin = (uint64_t)b;
    *end = (uint64_t)e;
    return 1;
}

/* Validates one tensor entry and fills t (data relative to f->data). */
static int parse_entry(const st_file *f, const char *name, const json_value *v, tp_st_tensor *t, char *err,
                       size_t err_size) {
    const char *file = f->path;
    if (v->type != JSON_OBJECT) {
        tp_set_err(err, err_size, "%s: tensor %s: entry is %s, not an object", file, name, a_type(v->type));
        return 0;
    }
    uint64_t begin, end;
    t->int32 = 0;
    if (!parse_dtype(file, name, json_get(v, "dtype"), &t->dtype, &t->int32, err, err_size)) return 0;
    if (!parse_shape(file, name, json_get(v, "shape"), t, err, err_size)) return 0;
    if (!parse_offsets(file, name, json_get(v, "data_offsets"), &begin, &end, err, err_size)) return 0;

    uint64_t need = tp_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) {
        if (__builtin_mul_overflow(need, (uint64_t)t->shape[i], &need) || need > SIZE_MAX) {
            char sh[160];
            tp_set_err(err, err_size, "%s: tensor %s: shape %s is too large", file, name,
                   tp_st_shape_str(t->shape, t->ndim, sh, sizeof sh));
            return 0;
        }
    }
    if (end - begin != need) {
        char sh[160];
        tp_set_err(err, err_size,
               "%s: tensor %s: shape %s of %s needs %llu bytes, but data_offsets [%llu, %llu] hold %llu bytes", file,
               name, tp_st_shape_str(t->shape, t->ndim, sh, sizeof sh), t->int32 ? "I32" : tp_dtype_name(t->dtype),
               (unsigned long long)need, (unsigned long long)begin, (unsigned long long)end,
               (unsigned long long)(end - begin));
        return 0;
    }
    if (end > f->data_size) {
        tp_set_err(err, err_size, "%s: truncated: tensor %s needs bytes up to %llu of the data area, file has %zu", file,
               name, (unsigned long long)end, f->data_size);
        return 0;
    }
    t->data = f->data + begin;
    t->nbytes = (size_t)need;
    t->file = f->path;
    return 1;
}

static int check_metadata(const st_file *f, const json_value *v, char *err, size_t err_size) {
    if (v->type != JSON_OBJECT) {
        tp_set_err(err, err_size, "%s: \"__metadata__\" is %s, not an object of strings", f->path,
               a_type(v->type));
        return 0;
    }
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i].type != JSON_STRING) {
            tp_set_err(err, err_size, "%s: \"__metadata__\" member \"%s\" is %s, not a string", f->path, v->keys[i],
                   a_type(v->items[i].type));
            return 0;
        }
    return 1;
}

static int by_offset(const void *a, const void *b) {
    const tp_st_tensor *x = a, *y = b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Sorts tensors [first, n) of one file by offset and rejects overlapping byte ranges. */
static int check_overlap(tp_st_model *m, size_t first, char *err, size_t err_size) {
    size_t n = m->table.n - first;
    if (n < 2) return 1; /* before the pointer: tensors is NULL while no tensor has been seen */
    tp_st_tensor *t = m->table.tensors + first;
    qsort(t, n, sizeof *t, by_offset);
    const tp_st_tensor *last = NULL; /* the non-empty tensor reaching furthest so far */
    for (size_t i = 0; i < n; i++) {
        if (!t[i].nbytes) continue; /* an empty range overlaps nothing */
        if (last && t[i].data < last->data + last->nbytes) {
            if (strcmp(last->name, t[i].name) == 0)
                tp_set_err(err, err_size, "%s: tensor %s appears twice in the header", t[i].file, t[i].name);
            else
                tp_set_err(err, err_size, "%s: tensors %s and %s overlap in the data area (the format forbids it)",
                       t[i].file, last->name, t[i].name);
            return 0;
        }
        if (!last || t[i].data + t[i].nbytes > last->data + last->nbytes) last = &t[i];
    }
    return 1;
}

/* ---- one file ---- */

static int load_header(tp_st_model *m, st_file *f, char *err, size_t err_size);

/* mmaps path, validates its header and appends its tensors. named_by: why this file is read
 * (for the open error), or NULL. */
static int load_file(tp_st_model *m, const char *path, const char *named_by, char *err, size_t err_size) {
    if (m->n_files == m->cap_files) {
        m->cap_files = m->cap_files ? 2 * m->cap_files : 8;
        m->files = tp_realloc(m->files, m->cap_files * sizeof *m->files);
    }
    st_file *f = &m->files[m->n_files++];
    memset(f, 0, sizeof *f);
    f->path = tp_strdup(path);

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tp_set_err(err, err_size, "%s: cannot open%s%s: %s", path, named_by ? " " : "", named_by ? named_by : "",
               strerror(errno));
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tp_set_err(err, err_size, "%s: fstat failed: %s", path, strerror(errno));
        close(fd);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        tp_set_err(err, err_size, "%s: not a regular file", path);
        close(fd);
        return 0;
    }
    if (st.st_size < 8) {
        tp_set_err(err, err_size,
               "%s: file is %lld bytes, shorter than the 8-byte header length: not a safetensors file (truncated?)",
               path, (long long)st.st_size);
        close(fd);
        return 0;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        tp_set_err(err, err_size, "%s: file of %lld bytes cannot be mapped", path, (long long)st.st_size);
        close(fd);
        return 0;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    if (close(fd) != 0 && map != MAP_FAILED) {
        tp_set_err(err, err_size, "%s: close failed: %s", path, strerror(errno));
        munmap(map, (size_t)st.st_size);
        return 0;
    }
    if (map == MAP_FAILED) {
        tp_set_err(err, err_size, "%s: mmap of %lld bytes failed: %s", path, (long long)st.st_size, strerror(map_errno));
        return 0;
    }
    f->map = map;
    f->size = (size_t)st.st_size;
    return load_header(m, f, err, err_size);
}

/* Validates the header of f (mapped, at least 8 bytes) and appends its tensors. */
static int load_header(tp_st_model *m, st_file *f, char *err, size_t err_size) {
    const char *path = f->path;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->map[i]; /* little-endian u64 */
    if (hlen > TP_ST_MAX_HEADER) {
        tp_set_err(err, err_size,
               "%s: header length %llu bytes is absurd (limit %u): not a safetensors file, or a corrupt one", path,
               (unsigned long long)hlen, TP_ST_MAX_HEADER);
        return 0;
    }
    if (hlen > f->size - 8) {
        tp_set_err(err, err_size, "%s: truncated: header length %llu goes beyond the end of the file (%zu bytes)", path,
               (unsigned long long)hlen, f->size);
        return 0;
    }
    f->data = f->map + 8 + hlen;
    f->data_size = f->size - 8 - (size_t)hlen;

    char jerr[160];
    json_value *root = json_parse((const char *)f->map + 8, (size_t)hlen, jerr, sizeof jerr);
    if (!root) {
        tp_set_err(err, err_size, "%s: header (%llu bytes from byte 8) is not valid JSON: %s", path,
               (unsigned long long)hlen, jerr);
        return 0;
    }
    if (root->type != JSON_OBJECT) {
        tp_set_err(err, err_size, "%s: header is %s, not a JSON object", path, a_type(root->type));
        json_free(root);
        return 0;
    }
    size_t first = m->table.n;
    int ok = 1;
    for (size_t i = 0; ok && i < root->n; i++) {
        const char *name = root->keys[i];
        if (root->key_lens[i] != strlen(name)) {
            tp_set_err(err, err_size, "%s: a tensor name contains a NUL byte", path);
            ok = 0;
        } else if (strcmp(name, "__metadata__") == 0) {
            ok = check_metadata(f, &root->items[i], err, err_size);
        } else {
            tp_st_tensor *t = tp_tensor_table_reserve(&m->table);
            ok = parse_entry(f, name, &root->items[i], t, err, err_size);
            if (ok) {
                t->name = tp_strdup(name);
                tp_tensor_table_push(&m->table);
            }
        }
    }
    json_free(root);
    return ok && check_overlap(m, first, err, err_size) && !tp_tensor_table_index(&m->table, first, err, err_size);
}

/* ---- index + shards (tensor_index.h) ---- */

static int load_shard(void *m, const char *path, const char *why, char *err, size_t err_size) {
    return load_file(m, path, why, err, err_size) ? 0 : -1;
}

static int load_index(tp_st_model *m, const char *index, const char *dir, char *err, size_t err_size) {
    return !tp_tensor_index_load(index, dir, m, load_shard, NULL, &m->table, err, err_size);
}

/* ---- public ---- */

tp_st_model *tp_st_open(const char *path, char *err, size_t err_size) {
    tp_st_model *m = tp_calloc(1, sizeof *m);
    tp_tensor_table_init(&m->table);
    char *dir, *file = tp_ckpt_resolve(path, "model.safetensors", "model.safetensors.index.json", &dir, err, err_size);
    int ok = file && (dir ? load_index(m, file, dir, err, err_size) : load_file(m, file, NULL, err, err_size));
    free(file);
    free(dir);
    if (!ok) { tp_st_close(m); return NULL; }
    return m;
}

tp_st_model *tp_st_open_memory(const void *data, size_t size, const char *name, char *err, size_t err_size) {
    tp_st_model *m = tp_calloc(1, sizeof *m);
    tp_tensor_table_init(&m->table);
    m->files = tp_calloc(1, sizeof *m->files);
    m->cap_files = m->n_files = 1;
    st_file *f = &m->files[0];
    f->path = tp_strdup(name);
    f->map = (uint8_t *)data; /* read only: nothing writes through map */
    f->size = size;
    f->borrowed = 1;
    int ok = 0;
    if (size < 8)
        tp_set_err(err, err_size, /* the words of load_file */
               "%s: file is %zu bytes, shorter than the 8-byte header length: not a safetensors file (truncated?)",
               name, size);
    else ok = load_header(m, f, err, err_size);
    if (!ok) { tp_st_close(m); return NULL; }
    return m;
}

tp_st_model *tp_st_open_index_text(const char *text, size_t len, const char *index, const char *dir, char *err,
                                   size_t err_size) {
    tp_st_model *m = tp_calloc(1, sizeof *m);
    tp_tensor_table_init(&m->table);
    if (tp_tensor_index_load_text(text, len, index, dir, m, load_shard, NULL, &m->table, err, err_size)) {
        tp_st_close(m);
        return NULL;
    }
    return m;
}

const tp_st_tensor *tp_st_find(const tp_st_model *m, const char *name) {
    return tp_tensor_table_find(&m->table, name);
}

size_t tp_st_count(const tp_st_model *m) { return m->table.n; }
const tp_st_tensor *tp_st_at(const tp_st_model *m, size_t i) { return i < m->table.n ? &m->table.tensors[i] : NULL; }
size_t tp_st_total_bytes(const tp_st_model *m) { return m->table.total_bytes; }
size_t tp_st_file_count(const tp_st_model *m) { return m->n_files; }

void tp_st_close(tp_st_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_files; i++) {
        if (m->files[i].map && !m->files[i].borrowed)
            munmap(m->files[i].map, m->files[i].size); /* cannot fail for a mapping we made */
        free(m->files[i].path);
    }
    tp_tensor_table_free(&m->table);
    free(m->files);
    free(m);
}

void tp_st_prefetch(const void *p, size_t n) {
    static long page;
    if (!p || !n) return;
    if (!page) page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + n;
    /* Only a hint: a failure costs speed, never correctness, so its status is not reported. */
    (void)madvise((void *)start, end - start, MADV_WILLNEED);
}
