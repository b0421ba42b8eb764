/* Restricted pickle VM for state dicts: see unpickle.h. */
#include "unpickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

typedef enum {
    V_MARK,
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_TUPLE,
    V_LIST,
    V_DICT,
    V_GLOBAL,
    V_STORAGE,
    V_TENSOR
} vkind;
static const char *kind_name[] = {"mark",      "None",    "a bool", "an int", "a float",
                                  "a string",  "a tuple", "a list", "a dict", "a class or function",
                                  "a storage", "a tensor"};

typedef enum {
    G_ORDERED_DICT,
    G_REBUILD_TENSOR_V2,
    G_REBUILD_PARAMETER,
    G_REBUILD_PARAMETER_WITH_STATE,
    G_STORAGE
} global_kind;

typedef struct value value;
struct value {
    vkind k;
    int64_t i; /* V_INT, V_BOOL; V_GLOBAL: global_kind; V_STORAGE: numel */
    char *s;   /* V_STR (NUL-terminated copy); V_STORAGE: key */
    size_t slen;
    value **items; /* V_TUPLE, V_LIST: [n]; V_DICT: [n] keys and values interleaved */
    size_t n, cap;
    tp_store_type store; /* V_GLOBAL of G_STORAGE, V_STORAGE */
    tp_pickle_tensor t;  /* V_TENSOR (name unset) */
};

typedef struct {
    const uint8_t *buf;
    size_t size, pos, op_pos; /* op_pos: the byte of the opcode being run, for messages */
    const char *what;
    char *err;
    size_t err_size;
    value **all; /* every value made, for freeing */
    size_t n_all, cap_all;
    value **stack;
    size_t sp, cap_stack;
    value **memo; /* [n_memo] NULL where unset */
    size_t n_memo;
    size_t memo_len; /* entries set: MEMOIZE's index, as len(memo) in Python */
} vm;

static value mark_value = {.k = V_MARK};

static int fail(vm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(vm *m, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m->err && m->err_size) snprintf(m->err, m->err_size, "%s: data.pkl byte %zu: %s", m->what, m->op_pos, msg);
    return -1;
}

static const struct {
    tp_store_type t;
    const char *name;
    size_t size;
} STORES[] = {
    {TP_STORE_F32, "FloatStorage", 4},  {TP_STORE_F16, "HalfStorage", 2}, {TP_STORE_BF16, "BFloat16Storage", 2},
    {TP_STORE_F64, "DoubleStorage", 8}, {TP_STORE_I64, "LongStorage", 8}, {TP_STORE_I32, "IntStorage", 4},
    {TP_STORE_I16, "ShortStorage", 2},  {TP_STORE_I8, "CharStorage", 1},  {TP_STORE_U8, "ByteStorage", 1},
    {TP_STORE_BOOL, "BoolStorage", 1},
};
#define N_STORES (sizeof STORES / sizeof *STORES)

const char *tp_store_type_name(tp_store_type t) { return (size_t)t < N_STORES ? STORES[t].name : "?"; }
size_t tp_store_type_size(tp_store_type t) { return (size_t)t < N_STORES ? STORES[t].size : 1; }

static value *new_value(vm *m, vkind k) {
    if (m->n_all == m->cap_all)
        m->all = tp_realloc(m->all, (m->cap_all = m->cap_all ? 2 * m->cap_all : 256) * sizeof *m->all);
    value *v = tp_calloc(1, sizeof *v);
    v->k = k;
    m->all[m->n_all++] = v;
    return v;
}

static void push(vm *m, value *v) {
    if (m->sp == m->cap_stack)
        m->stack = tp_realloc(m->stack, (m->cap_stack = m->cap_stack ? 2 * m->cap_stack : 64) * sizeof *m->stack);
    m->stack[m->sp++] = v;
}

static void add_item(value *c, value *v) {
    if (c->n == c->cap) c->items = tp_realloc(c->items, (c->cap = c->cap ? 2 * c->cap : 8) * sizeof *c->items);
    c->items[c->n++] = v;
}

/* Pops one value (not a mark). */
static value *pop(vm *m) {
    if (!m->sp) {
        fail(m, "stack underflow");
        return NULL;
    }
    value *v = m->stack[--m->sp];
    if (v->k == V_MARK) {
        fail(m, "unexpected mark");
        return NULL;
    }
    return v;
}

/* Index of the topmost mark, or -1 with an error. */
static long find_mark(vm *m) {
    for (size_t i = m->sp; i-- > 0;)
        if (m->stack[i]->k == V_MARK) return (long)i;
    fail(m, "no mark on the stack");
    return -1;
}

static int need(vm *m, size_t n) {
    if (m->size - m->pos < n) return fail(m, "truncated: the opcode needs %zu more bytes", n);
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t x = 0;
    for (int i = n; i-- > 0;) x = x << 8 | p[i];
    return x;
}

static int push_str(vm *m, size_t len) {
    if (need(m, len)) return -1;
    value *v = new_value(m, V_STR);
    v->s = tp_malloc(len + 1);
    memcpy(v->s, m->buf + m->pos, len);
    v->s[len] = 0;
    v->slen = len;
    m->pos += len;
    push(m, v);
    return 0;
}

static int memo_put(vm *m, uint64_t idx) {
    if (!m->sp || m->stack[m->sp - 1]->k == V_MARK) return fail(m, "memo put with nothing on the stack");
    if (idx > m->size) return fail(m, "memo index %llu is out of range", (unsigned long long)idx);
    if (idx >= m->n_memo) {
        size_t n = (size_t)idx + 1 > 2 * m->n_memo ? (size_t)idx + 1 : 2 * m->n_memo;
        m->memo = tp_realloc(m->memo, n * sizeof *m->memo);
        memset(m->memo + m->n_memo, 0, (n - m->n_memo) * sizeof *m->memo);
        m->n_memo = n;
    }
    if (!m->memo[idx]) m->memo_len++;
    m->memo[idx] = m->stack[m->sp - 1];
    return 0;
}

static int memo_get(vm *m, uint64_t idx) {
    if (idx >= m->n_memo || !m->memo[idx]) return fail(m, "memo index %llu was never set", (unsigned long long)idx);
    push(m, m->memo[idx]);
    return 0;
}

/* GLOBAL / STACK_GLOBAL: only the names a state dict needs; everything else is refused. */
static int push_global(vm *m, const char *module, const char *name) {
    value *v = new_value(m, V_GLOBAL);
    if (!strcmp(module, "collections") && !strcmp(name, "OrderedDict")) v->i = G_ORDERED_DICT;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) v->i = G_REBUILD_TENSOR_V2;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_parameter")) v->i = G_REBUILD_PARAMETER;
    else if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_parameter_with_state"))
        v->i = G_REBUILD_PARAMETER_WITH_STATE;
    else {
        int found = 0;
        if (!strcmp(module, "torch"))
            for (size_t i = 0; i < N_STORES; i++)
                if (!strcmp(name, STORES[i].name)) {
                    v->i = G_STORAGE;
                    v->store = STORES[i].t;
                    found = 1;
                }
        if (!found) {
            if (m->err && m->err_size)
                snprintf(m->err, m->err_size,
                         "refusing to load %.100s.%.100s from %s (data.pkl byte %zu): not a tensor "
                         "(tpgen rebuilds only state dicts of tensors and never runs code from a checkpoint)",
                         module, name, m->what, m->op_pos);
            return -1;
        }
    }
    push(m, v);
    return 0;
}

/* "module\nname\n" of the GLOBAL opcode. */
static int op_global(vm *m) {
    const char *p = (const char *)m->buf + m->pos, *end = (const char *)m->buf + m->size;
    const char *nl1 = memchr(p, '\n', (size_t)(end - p));
    const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
    if (!nl2 || nl1 - p > 200 || nl2 - nl1 > 200) return fail(m, "truncated or overlong GLOBAL");
    char module[256], name[256];
    snprintf(module, sizeof module, "%.*s", (int)(nl1 - p), p);
    snprintf(name, sizeof name, "%.*s", (int)(nl2 - nl1 - 1), nl1 + 1);
    m->pos = (size_t)(nl2 + 1 - (const char *)m->buf);
    return push_global(m, module, name);
}

static int int_items(vm *m, const value *tup, int64_t *out, int *n, const char *what) {
    if (tup->k != V_TUPLE) return fail(m, "_rebuild_tensor_v2: %s is %s, not a tuple", what, kind_name[tup->k]);
    if (tup->n > TP_PICKLE_MAX_DIMS)
        return fail(m, "_rebuild_tensor_v2: %s has %zu dims, at most %d are supported", what, tup->n,
                    TP_PICKLE_MAX_DIMS);
    for (size_t i = 0; i < tup->n; i++) {
        if (tup->items[i]->k != V_INT) return fail(m, "_rebuild_tensor_v2: %s[%zu] is not an int", what, i);
        out[i] = tup->items[i]->i;
    }
    *n = (int)tup->n;
    return 0;
}

/* REDUCE: calls one of the allowed callables on args (a tuple) by building the value it would
 * return. */
static int op_reduce(vm *m) {
    value *args = pop(m), *fn = args ? pop(m) : NULL;
    if (!fn) return -1;
    if (fn->k != V_GLOBAL) return fail(m, "REDUCE of %s, not of an allowed class or function", kind_name[fn->k]);
    if (args->k != V_TUPLE) return fail(m, "REDUCE with arguments that are %s, not a tuple", kind_name[args->k]);
    value **a = args->items;
    switch ((global_kind)fn->i) {
    case G_ORDERED_DICT:
        if (args->n != 0)
            return fail(m, "collections.OrderedDict called with %zu arguments; a state dict has none", args->n);
        push(m, new_value(m, V_DICT));
        return 0;
    case G_REBUILD_TENSOR_V2: {
        if (args->n != 6 && args->n != 7) return fail(m, "_rebuild_tensor_v2 takes 6 or 7 arguments, got %zu", args->n);
        if (a[0]->k != V_STORAGE)
            return fail(m, "_rebuild_tensor_v2: storage is %s, not a storage", kind_name[a[0]->k]);
        if (a[1]->k != V_INT || a[1]->i < 0)
            return fail(m, "_rebuild_tensor_v2: storage offset is not a non-negative int");
        value *t = new_value(m, V_TENSOR);
        int nd_stride;
        if (int_items(m, a[2], t->t.shape, &t->t.ndim, "size") || int_items(m, a[3], t->t.stride, &nd_stride, "stride"))
            return -1;
        if (nd_stride != t->t.ndim)
            return fail(m, "_rebuild_tensor_v2: size has %d dims but stride has %d", t->t.ndim, nd_stride);
        t->t.storage_key = a[0]->s;
        t->t.type = a[0]->store;
        t->t.storage_numel = a[0]->i;
        t->t.offset = a[1]->i;
        push(m, t);
        return 0;
    }
    case G_REBUILD_PARAMETER:
        if (args->n != 3 || a[0]->k != V_TENSOR)
            return fail(m, "_rebuild_parameter takes (tensor, requires_grad, hooks)");
        push(m, a[0]);
        return 0;
    case G_REBUILD_PARAMETER_WITH_STATE: /* torch 2: a Parameter with its __dict__, which is not needed */
        if (args->n != 4 || a[0]->k != V_TENSOR)
            return fail(m, "_rebuild_parameter_with_state takes (tensor, requires_grad, hooks, state)");
        push(m, a[0]);
        return 0;
    case G_STORAGE:
        return fail(m, "torch.%s is called; a storage type may appear only in a persistent id",
                    tp_store_type_name(fn->store));
    }
    return fail(m, "bad global");
}

/* BINPERSID: ("storage", torch.<T>Storage, key, location, numel) names a record of the archive. */
static int op_persid(vm *m) {
    value *pid = pop(m);
    if (!pid) return -1;
    value **a = pid->items;
    if (pid->k != V_TUPLE || pid->n != 5 || a[0]->k != V_STR || strcmp(a[0]->s, "storage") || a[1]->k != V_GLOBAL ||
        a[1]->i != G_STORAGE || a[2]->k != V_STR || a[3]->k != V_STR || a[4]->k != V_INT || a[4]->i < 0)
        return fail(m, "persistent id is not (\"storage\", torch.<T>Storage, key, location, numel)");
    if (!a[2]->slen || a[2]->slen > 64) return fail(m, "storage key of %zu bytes", a[2]->slen);
    for (size_t i = 0; i < a[2]->slen; i++) {
        char c = a[2]->s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'))
            return fail(m, "storage key \"%.64s\" has a character other than [A-Za-z0-9_]", a[2]->s);
    }
    value *s = new_value(m, V_STORAGE);
    s->s = a[2]->s; /* owned by a[2], which lives until the VM ends */
    s->store = a[1]->store;
    s->i = a[4]->i;
    push(m, s);
    return 0;
}

/* SETITEM: dict key value; SETITEMS: dict mark k1 v1 k2 v2 ... */
static int op_setitems(vm *m, int many) {
    size_t first;
    if (many) {
        long mk = find_mark(m);
        if (mk < 0) return -1;
        first = (size_t)mk + 1;
    } else {
        if (m->sp < 3) return fail(m, "SETITEM needs a dict, a key and a value");
        first = m->sp - 2;
    }
    size_t dict_at = many ? first - 2 : first - 1, new_sp = many ? first - 1 : first;
    if (first < (many ? 2u : 1u)) return fail(m, "SETITEMS without a dict below the mark");
    if ((m->sp - first) % 2) return fail(m, "SETITEMS with an odd number of items");
    value *d = m->stack[dict_at];
    if (d->k != V_DICT) return fail(m, "SETITEM on %s, not a dict", kind_name[d->k]);
    for (size_t i = first; i < m->sp; i++) {
        if (m->stack[i]->k == V_MARK) return fail(m, "unexpected mark");
        add_item(d, m->stack[i]);
    }
    m->sp = new_sp;
    return 0;
}

static int op_appends(vm *m, int many) {
    long mk = many ? find_mark(m) : (long)m->sp - 1;
    if (mk < 1) return mk < 0 && many ? -1 : fail(m, "APPEND without a list");
    value *l = m->stack[mk - 1];
    if (l->k != V_LIST) return fail(m, "APPEND to %s, not a list", kind_name[l->k]);
    for (size_t i = (size_t)mk + (many ? 1 : 0); i < m->sp; i++) {
        if (m->stack[i]->k == V_MARK) return fail(m, "unexpected mark");
        add_item(l, m->stack[i]);
    }
    m->sp = (size_t)mk;
    return 0;
}

/* Pops n values (n < 0: down to the mark) into a new tuple. */
static int op_tuple(vm *m, int n) {
    size_t first;
    if (n < 0) {
        long mk = find_mark(m);
        if (mk < 0) return -1;
        first = (size_t)mk + 1;
    } else {
        if (m->sp < (size_t)n) return fail(m, "stack underflow");
        first = m->sp - (size_t)n;
    }
    value *t = new_value(m, V_TUPLE);
    for (size_t i = first; i < m->sp; i++) {
        if (m->stack[i]->k == V_MARK) return fail(m, "unexpected mark");
        add_item(t, m->stack[i]);
    }
    m->sp = n < 0 ? first - 1 : first;
    push(m, t);
    return 0;
}

static const char *opcode_name(uint8_t op) {
    switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82:
    case 0x83:
    case 0x84: return "EXT";
    case 'P': return "PERSID";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'F': return "FLOAT";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'g': return "GET";
    case 'p': return "PUT";
    case 0x8b: return "LONG4";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
    }
}

static int run(vm *m, value **result) {
    while (m->pos < m->size) {
        m->op_pos = m->pos;
        uint8_t op = m->buf[m->pos++];
        int rc = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(m, 1)) return -1;
            if (m->buf[m->pos] < 2 || m->buf[m->pos] > 5)
                return fail(m, "pickle protocol %u is not 2..5", m->buf[m->pos]);
            m->pos++;
            break;
        case 0x95: /* FRAME: a length hint */
            if (need(m, 8)) return -1;
            m->pos += 8;
            break;
        case '.': /* STOP */
            if (!(*result = pop(m))) return -1;
            return 0;
        case '(': push(m, &mark_value); break;
        case '}': push(m, new_value(m, V_DICT)); break;
        case ']': push(m, new_value(m, V_LIST)); break;
        case ')': rc = op_tuple(m, 0); break;
        case 't': rc = op_tuple(m, -1); break;
        case 0x85: rc = op_tuple(m, 1); break;
        case 0x86: rc = op_tuple(m, 2); break;
        case 0x87: rc = op_tuple(m, 3); break;
        case 'N': push(m, new_value(m, V_NONE)); break;
        case 0x88:
        case 0x89: {
            value *v = new_value(m, V_BOOL);
            v->i = op == 0x88;
            push(m, v);
            break;
        }
        case 'J':
        case 'K':
        case 'M': { /* BININT (signed 4), BININT1, BININT2 */
            int n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
            if (need(m, (size_t)n)) return -1;
            value *v = new_value(m, V_INT);
            uint64_t x = rd_le(m->buf + m->pos, n);
            v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)x : (int64_t)x;
            m->pos += (size_t)n;
            push(m, v);
            break;
        }
        case 0x8a: { /* LONG1: n-byte two's complement */
            if (need(m, 1)) return -1;
            int n = m->buf[m->pos++];
            if (n > 8) return fail(m, "LONG1 of %d bytes does not fit 64 bits", n);
            if (need(m, (size_t)n)) return -1;
            uint64_t x = rd_le(m->buf + m->pos, n);
            if (n && n < 8 && (m->buf[m->pos + n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n);
            m->pos += (size_t)n;
            value *v = new_value(m, V_INT);
            v->i = (int64_t)x;
            push(m, v);
            break;
        }
        case 'G': /* BINFLOAT: big-endian double; only its kind matters here */
            if (need(m, 8)) return -1;
            m->pos += 8;
            push(m, new_value(m, V_FLOAT));
            break;
        case 'X':
        case 'T':
        case 'B': /* BINUNICODE, BINSTRING, BINBYTES: u32 length */
            if (need(m, 4)) return -1;
            m->pos += 4;
            rc = push_str(m, rd_le(m->buf + m->pos - 4, 4));
            break;
        case 0x8c:
        case 'U':
        case 'C': /* SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES */
            if (need(m, 1)) return -1;
            rc = push_str(m, m->buf[m->pos++]);
            break;
        case 0x8d:
        case 0x8e: { /* BINUNICODE8, BINBYTES8 */
            if (need(m, 8)) return -1;
            uint64_t n = rd_le(m->buf + m->pos, 8);
            m->pos += 8;
            if (n > m->size - m->pos) return fail(m, "truncated: a string of %llu bytes", (unsigned long long)n);
            rc = push_str(m, (size_t)n);
            break;
        }
        case 'c': rc = op_global(m); break;
        case 0x93: { /* STACK_GLOBAL */
            value *name = pop(m), *module = name ? pop(m) : NULL;
            if (!module) return -1;
            if (module->k != V_STR || name->k != V_STR) return fail(m, "STACK_GLOBAL of non-strings");
            rc = push_global(m, module->s, name->s);
            break;
        }
        case 'q': /* BINPUT, LONG_BINPUT, BINGET, LONG_BINGET: a 1- or 4-byte memo index */
        case 'r':
        case 'h':
        case 'j': {
            int n = op == 'q' || op == 'h' ? 1 : 4;
            if (need(m, (size_t)n)) return -1;
            uint64_t idx = rd_le(m->buf + m->pos, n);
            m->pos += (size_t)n;
            rc = op == 'q' || op == 'r' ? memo_put(m, idx) : memo_get(m, idx);
            break;
        }
        case 0x94: rc = memo_put(m, m->memo_len); break; /* MEMOIZE: the next index */
        case '0':
            if (!pop(m)) return -1;
            break; /* POP */
        case '1': {
            long mk = find_mark(m);
            if (mk < 0) return -1;
            m->sp = (size_t)mk;
            break;
        } /* POP_MARK */
        case '2': {
            value *v = pop(m);
            if (!v) return -1;
            push(m, v);
            push(m, v);
            break;
        } /* DUP */
        case 'R': rc = op_reduce(m); break;
        case 'Q': rc = op_persid(m); break;
        case 'b': { /* BUILD: the state of an OrderedDict (_metadata) or a tensor is not needed */
            value *state = pop(m);
            if (!state) return -1;
            if (!m->sp || (m->stack[m->sp - 1]->k != V_DICT && m->stack[m->sp - 1]->k != V_TENSOR))
                return fail(m, "BUILD on %s", m->sp ? kind_name[m->stack[m->sp - 1]->k] : "an empty stack");
            break;
        }
        case 's': rc = op_setitems(m, 0); break;
        case 'u': rc = op_setitems(m, 1); break;
        case 'a': rc = op_appends(m, 0); break;
        case 'e': rc = op_appends(m, 1); break;
        default: return fail(m, "pickle opcode 0x%02x (%s) is not allowed in a state dict", op, opcode_name(op));
        }
        if (rc) return -1;
    }
    m->op_pos = m->pos;
    return fail(m, "truncated: no STOP opcode");
}

int tp_unpickle_state_dict(const uint8_t *buf, size_t size, const char *what, tp_pickle_dict *out, char *err,
                           size_t err_size) {
    vm m = {.buf = buf, .size = size, .what = what, .err = err, .err_size = err_size};
    memset(out, 0, sizeof *out);
    value *root = NULL;
    int rc = run(&m, &root);
    if (!rc && root->k != V_DICT) rc = fail(&m, "the pickle holds %s, not a state dict", kind_name[root->k]);
    if (!rc) {
        out->tensors = tp_calloc(root->n / 2 + 1, sizeof *out->tensors);
        for (size_t i = 0; i + 1 < root->n && !rc; i += 2) {
            value *k = root->items[i], *v = root->items[i + 1];
            if (k->k != V_STR || strlen(k->s) != k->slen || !k->slen)
                rc = fail(&m, "state dict key %zu is %s, not a tensor name", i / 2,
                          k->k == V_STR ? "a string with a NUL" : kind_name[k->k]);
            else if (v->k != V_TENSOR) rc = fail(&m, "state dict entry %s is %s, not a tensor", k->s, kind_name[v->k]);
            else {
                tp_pickle_tensor *t = &out->tensors[out->n++];
                *t = v->t;
                t->name = tp_strdup(k->s);
                t->storage_key = tp_strdup(v->t.storage_key);
            }
        }
    }
    for (size_t i = 0; i < m.n_all; i++) {
        if (m.all[i]->k == V_STR) free(m.all[i]->s);
        free(m.all[i]->items);
        free(m.all[i]);
    }
    free(m.all);
    free(m.stack);
    free(m.memo);
    if (rc) tp_pickle_dict_free(out);
    return rc;
}

void tp_pickle_dict_free(tp_pickle_dict *d) {
    for (size_t i = 0; i < d->n; i++) {
        free(d->tensors[i].name);
        free(d->tensors[i].storage_key);
    }
    free(d->tensors);
    memset(d, 0, sizeof *d);
}
