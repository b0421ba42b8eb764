#include "ckpt_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"

int tp_ckpt_path_check(const char *name, char *err, size_t err_size) {
    if (!*name) {
        snprintf(err, err_size, "an empty file name");
        return -1;
    }
    if (name[0] == '/') {
        snprintf(err, err_size, "\"%.200s\" is an absolute path; shard files must be inside the model directory", name);
        return -1;
    }
    int depth = 0; /* directories below the model directory, walking the components */
    for (const char *p = name; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0) {
                snprintf(err, err_size, "\"%.200s\" leaves the model directory (\"..\"); shard files must be inside it",
                         name);
                return -1;
            }
        } else if (n > 0 && !(n == 1 && p[0] == '.')) depth++;
        p += n;
        while (*p == '/') p++;
    }
    return 0;
}

char *tp_ckpt_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    char *p = tp_malloc(n + strlen(name) + 2);
    sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
    return p;
}

char *tp_ckpt_resolve(const char *path, const char *single, const char *index, char **index_dir, char *err,
                      size_t err_size) {
    *index_dir = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        tp_set_err(err, err_size, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (tp_ckpt_ends_with(path, ".json")) *index_dir = tp_ckpt_dir_of(path);
        return tp_strdup(path);
    }
    char *s = tp_ckpt_join(path, single), *x = tp_ckpt_join(path, index);
    if (stat(s, &st) == 0) {
        free(x);
        return s;
    }
    int single_errno = errno;
    if (stat(x, &st) == 0) {
        free(s);
        *index_dir = tp_strdup(path);
        return x;
    }
    int index_errno = errno;
    if (single_errno != ENOENT) tp_set_err(err, err_size, "%s: %s", s, strerror(single_errno));
    else if (index_errno != ENOENT) tp_set_err(err, err_size, "%s: %s", x, strerror(index_errno));
    else tp_set_err(err, err_size, "no %s or %s in %s", single, index, path);
    free(s);
    free(x);
    return NULL;
}

char *tp_ckpt_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = tp_strdup(slash ? path : ".");
    if (slash) dir[slash - path + (slash == path)] = 0; /* keep "/" for a file in the root */
    return dir;
}

int tp_ckpt_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

