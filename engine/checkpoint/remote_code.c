#include "remote_code.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/log.h"

#define CODEGEN_GROUPS 4 /* HF's CodeGenAttention: self.mp_num = 4 */

int tp_modeling_mp_num(const char *text) {
    int found = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!strncmp(p, "self.", 5)) p += 5;
        if (strncmp(p, "mp_num", 6)) continue; /* a statement that starts with mp_num (comments start with #) */
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '=' || p[1] == '=') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        if (!isdigit((unsigned char)*p)) continue; /* mp_num = mp_num (an argument passed on) */
        long v = strtol(p, (char **)&p, 10);
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p && *p != '\n' && *p != '#') continue; /* mp_num = 4 * x: not a plain constant */
        if (v < 1 || v > TP_MAX_QKV_GROUPS) return -1;
        if (found && found != v) return -1;
        found = (int)v;
    }
    return found;
}

/* auto_map's model entry ("modeling_codegen.CodeGenForCausalLM", or "ORG/NAME--module.Class"
 * as HF writes it for code from another repo), or NULL when the model class is HF's own. */
static const char *auto_map_model(const json_value *root) {
    const json_value *am = json_get(root, "auto_map");
    if (!am || am->type != JSON_OBJECT) return NULL;
    const json_value *v = json_get(am, "AutoModelForCausalLM");
    for (size_t i = 0; !v && i < am->n; i++)
        if (!strncmp(am->keys[i], "AutoModel", 9)) v = &am->items[i];
    return v && v->type == JSON_STRING ? v->str : NULL;
}

/* dir/<module>.py of an auto_map entry into out; -1 with err when the entry is malformed. */
static int module_file(const char *dir, const char *entry, const char *cfg_path, char *out, size_t size,
                       char *err, size_t err_size) {
    const char *m = strstr(entry, "--");
    m = m ? m + 2 : entry;
    const char *dot = strrchr(m, '.');
    if (!dot || dot == m || memchr(m, '/', (size_t)(dot - m)) || !strncmp(m, "..", 2)) {
        snprintf(err, err_size, "%s: auto_map entry \"%s\" is not \"module.Class\"", cfg_path, entry);
        return -1;
    }
    snprintf(out, size, "%s/%.*s.py", dir, (int)(dot - m), m);
    return 0;
}

/* G from config.json (root) at cfg_path, in dir: 4, the file's mp_num, or -1 with err. */
static int checkpoint_groups(const json_value *root, const char *dir, const char *cfg_path, char *file,
                             size_t file_size, char *err, size_t err_size) {
    const char *entry = auto_map_model(root);
    file[0] = 0;
    if (!entry) return CODEGEN_GROUPS;
    if (module_file(dir, entry, cfg_path, file, file_size, err, err_size)) return -1;
    size_t len;
    char *text = tp_read_file(file, &len);
    if (!text) {
        snprintf(err, err_size,
                 "%s: auto_map asks for remote code %s, which cannot be read (%s); tpgen needs it to know the "
                 "qkv_proj layout: put the file next to config.json or state the group count with --qkv-groups N",
                 cfg_path, file, strerror(errno));
        return -1;
    }
    int g = memchr(text, 0, len) ? -1 : tp_modeling_mp_num(text);
    free(text);
    if (g <= 0) {
        snprintf(err, err_size,
                 "%s: auto_map asks for remote code %s that tpgen cannot identify (%s); tpgen will not guess the "
                 "qkv_proj layout: state its group count with --qkv-groups N (mp_num: 4 for CodeGen, 8 for CodeGen2)",
                 cfg_path, file, g == 0 ? "no `mp_num = N` assignment" : "conflicting or out-of-range mp_num values");
        return -1;
    }
    return g;
}

int tp_checkpoint_qkv_groups(const char *path, int n_head, int flag, int *groups, char *err, size_t err_size) {
    char cfg_path[4096], dir[4096], file[4200];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
    } else {
        snprintf(cfg_path, sizeof cfg_path, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    }
    size_t len;
    char *text = tp_read_file(cfg_path, &len);
    if (!text) {
        snprintf(err, err_size, "cannot read %s: %s", cfg_path, strerror(errno));
        return -1;
    }
    char jerr[256];
    json_value *root = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!root) {
        snprintf(err, err_size, "%s is not JSON: %s", cfg_path, jerr);
        return -1;
    }
    char ferr[8192];
    int g = checkpoint_groups(root, dir, cfg_path, file, sizeof file, ferr, sizeof ferr);
    json_free(root);
    const char *from = file[0] ? file : "HF's CodeGen class (config.json has no auto_map model entry)";
    if (flag > 0 && file[0] && g > 0 && flag != g) { /* an identified file, not HF's default */
        snprintf(err, err_size, "--qkv-groups %d disagrees with the checkpoint: %s has mp_num = %d", flag, from, g);
        return -1;
    }
    if (flag > 0) g = flag, from = "--qkv-groups";
    if (g < 0) {
        snprintf(err, err_size, "%s", ferr);
        return -1;
    }
    if (n_head % g) {
        snprintf(err, err_size,
                 "%s: n_head %d is not a multiple of %d, the qkv_proj group count (from %s): each group must "
                 "hold whole heads",
                 cfg_path, n_head, g, from);
        return -1;
    }
    *groups = g;
    if (file[0]) tp_log0("qkv_proj: %d groups (mp_num in %s%s)\n", g, file, flag > 0 ? ", and --qkv-groups" : "");
    return 0;
}
