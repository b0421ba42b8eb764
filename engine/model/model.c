/* The forward pass on one rank, its structure asked of the architecture (engine/model/arch.h):
 *   h = wte[ids]
 *   parallel residual (CodeGenForCausalLM): x = LN1(h); h = h + allreduce(attn_partial(x) + mlp_partial(x))
 *   sequential residual (LlamaForCausalLM):  h = h + allreduce(attn_partial(RMS1(h)));
 *                                            h = h + allreduce(mlp_partial(RMS2(h)))
 *   logits = lm_head(norm_f(h)) for the wanted rows, this rank's vocab slice.
 * In the parallel form both branches read the same x, so each rank adds its two partial sums
 * before the one all-reduce of the layer (T * E elements cross per layer); the sequential form
 * needs the attention's full sum before the MLP's norm: two all-reduces per layer.
 */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define ACT_ALIGN 256

static size_t align_up(size_t x) { return (x + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN; }

/* Lays out the activation arena for these limits in a (pointers relative to base); returns its size.
 * tp_model_acts_bytes (the memory plan) and tp_model_alloc share it. */
static size_t acts_layout(const tp_model *m, tp_acts *a, char *base, int max_tokens, int max_rows, int max_seqs,
                          long kv_blocks, int block_size) {
    const tp_backend *b = m->b;
    const tp_config *c = &m->cfg;
    size_t es = tp_dtype_size(b->act);
    int T = max_tokens, E = c->n_embd, Hl = m->sh.n_heads, Hkl = m->sh.n_kv_heads, D = c->head_dim,
        Il = m->sh.n_inner;
    const int gated = c->arch->mlp == TP_MLP_SILU_GATED;
    a->max_tokens = T;
    a->max_rows = max_rows;
    a->max_seqs = max_seqs;
    /* A sequence holds at most n_positions tokens and at most the whole cache: the block table is
     * sized by the smaller (n_positions alone may be huge; it is only a limit). */
    long pos_blocks = ((long)c->n_positions + block_size - 1) / block_size;
    a->max_blocks = (int)(pos_blocks < kv_blocks ? pos_blocks : kv_blocks);

    /* Size table: one arena for every activation buffer. */
    struct { void **p; size_t bytes; } table[] = {
        {&a->h, (size_t)T * E * es},
        {&a->ln, (size_t)T * E * es},
        {&a->qkv, (size_t)T * (Hl + 2 * Hkl) * D * es},
        {&a->att, (size_t)T * Hl * D * es},
        {&a->mlp, (size_t)T * Il * es},
        {&a->gu, gated ? (size_t)T * 2 * Il * es : 0},
        {&a->part, (size_t)T * E * es},
        {&a->rows, (size_t)max_rows * E * es},
        {(void **)&a->logits, (size_t)max_rows * m->sh.n_vocab * sizeof(float)},
        {(void **)&a->ids, (size_t)T * sizeof(int32_t)},
        {(void **)&a->pos, (size_t)T * sizeof(int32_t)},
        {(void **)&a->seq, (size_t)T * sizeof(int32_t)},
        {(void **)&a->block_table, (size_t)max_seqs * a->max_blocks * sizeof(int32_t)},
    };
    int n = sizeof table / sizeof table[0];
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (base) *table[i].p = table[i].bytes ? base + off : NULL;
        off += align_up(table[i].bytes);
    }
    return off;
}

size_t tp_model_acts_bytes(const tp_model *m, int max_tokens, int max_rows, int max_seqs, long kv_blocks,
                           int block_size) {
    tp_acts a;
    return acts_layout(m, &a, NULL, max_tokens, max_rows, max_seqs, kv_blocks, block_size);
}

void tp_model_alloc(tp_model *m, int max_tokens, int max_rows, int max_seqs, int kv_blocks, int block_size) {
    tp_backend *b = m->b;
    const tp_config *c = &m->cfg;
    tp_acts *a = &m->a;
    int T = max_tokens, Hkl = m->sh.n_kv_heads, D = c->head_dim;
    const size_t total = tp_model_acts_bytes(m, max_tokens, max_rows, max_seqs, kv_blocks, block_size);
    a->arena = b->alloc(b, total, "activations");
    acts_layout(m, a, (char *)a->arena, max_tokens, max_rows, max_seqs, kv_blocks, block_size);
    tp_kv_cache_init(&m->kv, b, c->n_layer, Hkl, D, block_size, kv_blocks);
    tp_log0("memory per rank: weights %.1f MiB, activations %.1f MiB (%d tokens/step), KV cache %.1f MiB\n",
            m->w.arena_bytes / 1048576.0, total / 1048576.0, T,
            (double)m->kv.bytes_per_token * kv_blocks * block_size / 1048576.0);
    tp_log0("KV cache: %d tokens (%d blocks of %d), %zu bytes per token per rank\n", kv_blocks * block_size,
            kv_blocks, block_size, m->kv.bytes_per_token);
}

tp_attn_shape tp_model_attn_shape(const tp_model *m) {
    const tp_config *c = &m->cfg;
    return (tp_attn_shape){m->sh.n_heads, m->sh.n_kv_heads, c->head_dim, c->rotary_dim, c->arch->rope, c->rope_theta};
}

void tp_model_free(tp_model *m) {
    tp_backend *b = m->b;
    if (m->a.arena) b->free(b, m->a.arena);
    if (m->w.arena) b->free(b, m->w.arena);
    tp_kv_cache_free(&m->kv, b);
    free(m->w.layers);
    memset(&m->a, 0, sizeof m->a);
    m->w.arena = NULL;
    m->w.layers = NULL;
}

/* A step a CUDA graph can replay: every token is a logits row and there is at most one token per
 * sequence (pure decode), so its kernels read everything that varies (ids, positions, block
 * tables) from the fixed device buffers. Keyed by the token count; -1 when not replayable. */
static int graph_key(const tp_model *m, const tp_step_host *s) {
    if (!m->use_graphs || !m->b->graph_launch) return -1;
    if (m->comm->size > 1 && !m->comm->capturable) return -1;
    if (s->n_rows != s->n_tokens || s->n_tokens > s->n_seqs || s->n_tokens > TP_MAX_GRAPH_TOKENS) return -1;
    if (s->max_blocks != m->a.max_blocks) return -1;
    for (int t = 0; t < s->n_rows; t++)
        if (s->rows[t] != t || (t > 0 && s->seq[t] == s->seq[t - 1])) return -1; /* drafts: several per sequence */
    return s->n_tokens;
}

/* x = norm(h) with the architecture's norm: LayerNorm (g, beta) or RMSNorm (g). */
static void norm(const tp_model *m, void *x, const void *h, const void *g, const void *beta, int T) {
    tp_backend *b = m->b;
    const tp_config *c = &m->cfg;
    if (c->arch->norm == TP_NORM_RMSNORM) b->rmsnorm(b, x, h, g, T, c->n_embd, c->norm_eps);
    else b->layernorm(b, x, h, g, beta, T, c->n_embd, c->norm_eps);
}

/* part [T, E] = this rank's attention partial sum of x = a->ln [T, E]:
 * qkv [T, (Hl+2Hkl)D] -> rotary + cache write -> att [T, Hl*D] -> o_proj (+ its bias on rank 0). */
static void attn_partial(tp_model *m, const tp_layer *L, int l, const tp_step *st, const tp_attn_shape *as, int T) {
    tp_backend *b = m->b;
    tp_acts *a = &m->a;
    const int E = m->cfg.n_embd, HlD = as->n_heads * as->head_dim;
    const int QKV = (as->n_heads + 2 * as->n_kv_heads) * as->head_dim;
    b->matmul(b, a->qkv, a->ln, L->qkv, L->qkv_b, T, QKV, E, 0);
    b->rotary_kv_write(b, a->qkv, m->kv.k[l], m->kv.v[l], st, as);
    b->attention(b, a->att, a->qkv, m->kv.k[l], m->kv.v[l], st, as);
    b->matmul(b, a->part, a->att, L->out, m->sh.rank == 0 ? L->out_b : NULL, T, E, HlD, 0);
}

/* part (+= when accumulate, else =) this rank's MLP partial sum of x = a->ln [T, E] (+ the output
 * bias once, on rank 0):
 * GELU: mlp [T, Il] = gelu(fc_in x + b); SILU_GATED: gu [T, 2 Il] = [gate x | up x],
 * mlp = silu(gate) * up. */
static void mlp_partial(tp_model *m, const tp_layer *L, int T, int accumulate) {
    tp_backend *b = m->b;
    tp_acts *a = &m->a;
    const int E = m->cfg.n_embd, Il = m->sh.n_inner;
    if (m->cfg.arch->mlp == TP_MLP_SILU_GATED) {
        b->matmul(b, a->gu, a->ln, L->mlp_in, L->mlp_in_b, T, 2 * Il, E, 0);
        b->silu_mul(b, a->mlp, a->gu, T, Il);
    } else b->matmul_gelu(b, a->mlp, a->ln, L->mlp_in, L->mlp_in_b, T, Il, E);
    b->matmul(b, a->part, a->mlp, L->mlp_out, m->sh.rank == 0 ? L->mlp_out_b : NULL, T, E, Il, accumulate);
}

/* h += allreduce(part) */
static void reduce_add(tp_model *m, int T) {
    const size_t n = (size_t)T * m->cfg.n_embd;
    m->comm->allreduce_sum(m->comm, m->a.part, n, m->b->act);
    m->b->add(m->b, m->a.h, m->a.part, n);
}

static void run_layers(tp_model *m, const tp_step *st, const tp_step_host *s) {
    tp_backend *b = m->b;
    const tp_config *c = &m->cfg;
    tp_acts *a = &m->a;
    int T = s->n_tokens, E = c->n_embd;
    const tp_attn_shape as = tp_model_attn_shape(m);
    b->embed(b, a->h, m->w.wte, a->ids, T, E);
    for (int l = 0; l < c->n_layer; l++) {
        const tp_layer *L = &m->w.layers[l];
        norm(m, a->ln, a->h, L->norm1_g, L->norm1_b, T);
        attn_partial(m, L, l, st, &as, T);
        if (c->arch->residual == TP_RESIDUAL_PARALLEL) { /* both branches on the same x, one all-reduce */
            mlp_partial(m, L, T, 1);
            reduce_add(m, T);
        } else {
            reduce_add(m, T);
            norm(m, a->ln, a->h, L->norm2_g, L->norm2_b, T);
            mlp_partial(m, L, T, 0);
            reduce_add(m, T);
        }
    }
    if (s->n_rows == 0) return;
    b->gather_rows(b, a->rows, a->h, s->rows, s->n_rows, E);
    norm(m, a->rows, a->rows, m->w.normf_g, m->w.normf_b, s->n_rows);
    b->matmul_f32out(b, a->logits, a->rows, m->w.lm_head, m->w.lm_head_b, s->n_rows, m->sh.n_vocab, E);
}

void tp_model_forward(tp_model *m, const tp_step_host *s) {
    tp_backend *b = m->b;
    tp_acts *a = &m->a;
    int T = s->n_tokens;
    if (T > a->max_tokens || s->n_rows > a->max_rows || s->n_seqs > a->max_seqs || s->max_blocks > a->max_blocks)
        tp_die("internal: step of %d tokens/%d rows/%d seqs exceeds the buffers (%d/%d/%d)", T, s->n_rows,
               s->n_seqs, a->max_tokens, a->max_rows, a->max_seqs);

    /* The only host->device traffic of a step: ids, positions and block tables. */
    b->to_device(b, a->ids, s->ids, T * sizeof(int32_t));
    b->to_device(b, a->pos, s->pos, T * sizeof(int32_t));
    b->to_device(b, a->seq, s->seq, T * sizeof(int32_t));
    b->to_device(b, a->block_table, s->block_table, (size_t)s->n_seqs * s->max_blocks * sizeof(int32_t));
    int max_pos = 0;
    for (int t = 0; t < T; t++) max_pos = s->pos[t] > max_pos ? s->pos[t] : max_pos;
    tp_step st = {T, s->n_seqs, m->kv.block_size, s->max_blocks, max_pos, a->pos, a->seq, a->block_table};
    m->forwarded_tokens += T;

    int key = graph_key(m, s);
    if (key >= 0 && b->graph_launch(b, key)) return; /* the whole step in one launch */
    if (key >= 0) b->graph_begin(b, key);
    run_layers(m, &st, s);
    if (key >= 0) b->graph_end(b, key); /* instantiates the graph and runs this step with it */
}
