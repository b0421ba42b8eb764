/* HF cache lookup for hub names: see hub.h. */
#include "hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"

int tp_hub_is_name(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.') return 0;
    if (strstr(s, "..")) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.' || *p == '/'))
            return 0;
    return 1;
}

/* The cache root as transformers computes it; why says which variable chose it. */
static void cache_root(char *out, size_t size, char *why, size_t why_size) {
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v) {
        snprintf(out, size, "%s", v);
        snprintf(why, why_size, "HF_HUB_CACHE");
    } else if ((v = getenv("HF_HOME")) && *v) {
        snprintf(out, size, "%s/hub", v);
        snprintf(why, why_size, "HF_HOME=%s", v);
    } else if ((v = getenv("XDG_CACHE_HOME")) && *v) {
        snprintf(out, size, "%s/huggingface/hub", v);
        snprintf(why, why_size, "XDG_CACHE_HOME=%s", v);
    } else {
        v = getenv("HOME");
        snprintf(out, size, "%s/.cache/huggingface/hub", v && *v ? v : ".");
        snprintf(why, why_size, "the default; set HF_HUB_CACHE or HF_HOME to look elsewhere");
    }
}

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

/* A revision names a file under refs/ or a snapshot: relative, no "." or ".." component. */
static int revision_ok(const char *r) {
    if (!*r || r[0] == '/' || strlen(r) > 200) return 0;
    for (const char *p = r; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        p += n + (slash ? 1 : 0);
    }
    return 1;
}

char *tp_hub_resolve(const char *model, const char *revision, char *err, size_t err_size) {
    struct stat s;
    if (stat(model, &s) == 0 || !tp_hub_is_name(model)) {
        if (revision) {
            snprintf(err, err_size, "--revision %s applies to hub names (ORG/NAME) only; --model %s is a local path",
                     revision, model);
            return NULL;
        }
        return tp_strdup(model);
    }
    const char *rev = revision ? revision : "main";
    char root[4096], why[4200], repo[8192], ref[8400], snap[8400 + 256], fetch[600];
    cache_root(root, sizeof root, why, sizeof why);
    const char *slash = strchr(model, '/');
    snprintf(repo, sizeof repo, "%s/models--%.*s--%s", root, (int)(slash - model), model, slash + 1);
    snprintf(fetch, sizeof fetch, "huggingface-cli download %s%s%s", model, revision ? " --revision " : "",
             revision ? revision : "");
    if (!revision_ok(rev)) {
        snprintf(err, err_size, "--revision \"%s\" is not a branch, tag or commit name", rev);
        return NULL;
    }
    if (!is_dir(repo)) {
        snprintf(err, err_size,
                 "--model %s is not a local path and not in the Hugging Face cache: looked for %s "
                 "(cache %s, from %s); tpgen does not download: fetch it with `%s`",
                 model, repo, root, why, fetch);
        return NULL;
    }
    snprintf(ref, sizeof ref, "%s/refs/%s", repo, rev);
    size_t len;
    char *commit = tp_read_file(ref, &len);
    if (commit) {
        while (len && (commit[len - 1] == '\n' || commit[len - 1] == '\r' || commit[len - 1] == ' ')) commit[--len] = 0;
        if (!len || !revision_ok(commit) || strchr(commit, '/')) {
            snprintf(err, err_size, "%s: does not hold a commit hash", ref);
            free(commit);
            return NULL;
        }
        snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, commit);
        if (!is_dir(snap)) {
            snprintf(err, err_size,
                     "%s names commit %s, but %s is missing (an interrupted download?): fetch it again "
                     "with `%s`",
                     ref, commit, snap, fetch);
            free(commit);
            return NULL;
        }
        free(commit);
        return tp_strdup(snap);
    }
    snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, rev);
    if (is_dir(snap)) return tp_strdup(snap);
    snprintf(err, err_size,
             "%s is in the Hugging Face cache (%s) but revision %s is not: no %s and no snapshots/%s; "
             "fetch it with `%s`",
             model, repo, rev, ref, rev, fetch);
    return NULL;
}
