#include "kernels/mem_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

void tp_mem_plan_add(tp_mem_plan *p, const char *name, size_t bytes, tp_mem_kind kind, const char *note_fmt, ...) {
    if (p->n == TP_MEM_PLAN_MAX) tp_die("internal: memory plan holds at most %d items", TP_MEM_PLAN_MAX);
    tp_mem_item *it = &p->item[p->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->bytes = bytes;
    it->kind = kind;
    va_list ap;
    va_start(ap, note_fmt);
    vsnprintf(it->note, sizeof it->note, note_fmt, ap);
    va_end(ap);
}

size_t tp_mem_plan_sum(const tp_mem_plan *p, tp_mem_kind kind) {
    size_t s = 0;
    for (int i = 0; i < p->n; i++)
        if (p->item[i].kind == kind) s += p->item[i].bytes;
    return s;
}

size_t tp_mem_plan_needed(const tp_mem_plan *p) {
    return tp_mem_plan_sum(p, TP_MEM_DEVICE) + tp_mem_plan_sum(p, TP_MEM_HEADROOM);
}

const tp_mem_item *tp_mem_plan_find(const tp_mem_plan *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->item[i].name, name) == 0) return &p->item[i];
    return NULL;
}

void tp_mem_plan_format(const tp_mem_plan *p, char *buf, size_t size) {
    static const char *kind_name[] = {"device", "held", "headroom", "pinned host"};
    const double MiB = 1048576.0;
    size_t u = 0;
#define PUT(...) (u += (size_t)snprintf(buf + u, u < size ? size - u : 0, __VA_ARGS__))
    PUT("  %-30s %12s  %-11s %s\n", "buffer", "MiB", "kind", "sized for");
    for (int i = 0; i < p->n; i++) {
        const tp_mem_item *it = &p->item[i];
        PUT("  %-30s %12.1f  %-11s %s\n", it->name, it->bytes / MiB, kind_name[it->kind], it->note);
    }
    PUT("  %-30s %12.1f  (allocated at start: %.1f, held since the backend started: %.1f, headroom: %.1f;"
        " pinned host: %.1f)\n",
        "device total", (tp_mem_plan_sum(p, TP_MEM_DEVICE) + tp_mem_plan_sum(p, TP_MEM_HELD) +
                         tp_mem_plan_sum(p, TP_MEM_HEADROOM)) / MiB,
        tp_mem_plan_sum(p, TP_MEM_DEVICE) / MiB, tp_mem_plan_sum(p, TP_MEM_HELD) / MiB,
        tp_mem_plan_sum(p, TP_MEM_HEADROOM) / MiB, tp_mem_plan_sum(p, TP_MEM_PINNED) / MiB);
#undef PUT
    if (u >= size && size > 0) buf[size - 1] = '\0';
}
