/* Loading libtpgen-cuda.so (kernels/cuda_module.h): once per process, under a lock. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda_module.h"

#define MODULE_NAME "libtpgen-cuda.so"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *handle;             /* the module, once loaded */
static char loaded_path[PATH_MAX];
static char failure[2048];       /* why the first load failed: later calls say the same */

/* ../lib/MODULE_NAME from the executable's directory, in out; 0 or -1. */
static int beside_exe(char *out, size_t size) {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    return snprintf(out, size, "%s/../lib/" MODULE_NAME, exe) < (int)size ? 0 : -1;
}

/* The module's exports: its interface hash first, then every entry point, so a module from
 * other sources is refused at load rather than at first use. */
static const char *const entry_points[] = {"tpcuda_device_count", "tpcuda_backend_create", "tpcuda_use_int8",
                                           "tpcuda_use_int4", "tpcuda_comm_nccl_create"};

#ifdef TPGEN_HAVE_CUDA
static const char build_dir[] = TPGEN_CUDA_MODULE_DIR; /* the build tree's lib/ */
static const char iface[] = TPGEN_CUDA_IFACE;
#else
static const char build_dir[] = "", iface[] = ""; /* no module in this build */
#endif

/* Why the loaded module is not this build's, in why (NULL when it is). */
static const char *foreign(char *why, size_t size) {
    const char *(*theirs)(void) = (const char *(*)(void))dlsym(handle, "tpcuda_interface");
    if (!theirs) return "it has no tpcuda_interface";
    if (strcmp(theirs(), iface) != 0) {
        snprintf(why, size, "its interface hash is %.20s, this tpgen's %s", theirs(), iface);
        return why;
    }
    for (size_t i = 0; i < sizeof entry_points / sizeof *entry_points; i++)
        if (!dlsym(handle, entry_points[i])) {
            snprintf(why, size, "it lacks %s", entry_points[i]);
            return why;
        }
    return NULL;
}

/* Tries path: 1 loaded, 0 absent (appended to tried), -1 present but not loaded (failure set,
 * after whence: "TPGEN_CUDA_MODULE: " or ""). */
static int try_path(const char *path, const char *whence, char *tried, size_t tried_size) {
    if (access(path, F_OK) != 0) {
        const size_t used = strlen(tried);
        snprintf(tried + used, tried_size - used, "%s%s (%s)", used ? ", " : "", path, strerror(errno));
        return 0;
    }
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(failure, sizeof failure, "%sthe CUDA backend module %s did not load: %s", whence, path, dlerror());
        return -1;
    }
    char buf[128];
    const char *what = foreign(buf, sizeof buf);
    if (what) {
        snprintf(failure, sizeof failure, "%sthe CUDA backend module %s was built from other sources than this tpgen "
                 "(%s); rebuild both, or point TPGEN_CUDA_MODULE at the module of this build", whence, path, what);
        dlclose(handle);
        handle = NULL;
        return -1;
    }
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    return 1;
}

int tp_backend_cuda_compiled(void) {
#ifdef TPGEN_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

static int load_locked(void) {
    if (!tp_backend_cuda_compiled()) {
        snprintf(failure, sizeof failure, "this tpgen was built without the CUDA backend (configure with -DTPGEN_CUDA=ON)");
        return -1;
    }
    char tried[3 * PATH_MAX + 64] = "", path[PATH_MAX];
    const char *env = getenv("TPGEN_CUDA_MODULE");
    if (env && *env) { /* a name without a slash is a file here, not a library-path search */
        snprintf(path, sizeof path, "%s%s", strchr(env, '/') ? "" : "./", env);
        const int r = try_path(path, "TPGEN_CUDA_MODULE: ", tried, sizeof tried);
        if (r == 0) snprintf(failure, sizeof failure, "TPGEN_CUDA_MODULE: tried %s", tried);
        return r == 1 ? 0 : -1;
    }
    char in_build[PATH_MAX];
    snprintf(in_build, sizeof in_build, "%s/" MODULE_NAME, build_dir);
    const char *candidates[2] = {beside_exe(path, sizeof path) == 0 ? path : NULL, in_build};
    for (int i = 0; i < 2; i++) {
        if (!candidates[i]) continue;
        const int r = try_path(candidates[i], "", tried, sizeof tried);
        if (r != 0) return r == 1 ? 0 : -1;
    }
    snprintf(failure, sizeof failure,
             "the CUDA backend module " MODULE_NAME " was not found: tried %s (set TPGEN_CUDA_MODULE to its path)", tried);
    return -1;
}

int tp_cuda_module_load(char *err, size_t err_size) {
    pthread_mutex_lock(&lock);
    const int r = handle ? 0 : failure[0] ? -1 : load_locked();
    pthread_mutex_unlock(&lock);
    if (r) snprintf(err, err_size, "%s", failure);
    return r;
}

void *tp_cuda_module_symbol(const char *name, char *err, size_t err_size) {
    if (tp_cuda_module_load(err, err_size)) return NULL;
    dlerror();
    void *f = dlsym(handle, name);
    if (!f) snprintf(err, err_size, "internal: the CUDA backend module %s lacks %s: %s", loaded_path, name, dlerror());
    return f;
}

const char *tp_cuda_module_path(void) { return loaded_path; }

int tp_cuda_module_emulated(void) {
    pthread_mutex_lock(&lock);
    const int r = handle && dlsym(handle, "tpcuda_emulated") != NULL;
    pthread_mutex_unlock(&lock);
    return r;
}
