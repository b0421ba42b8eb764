/* CUDA graphs for the decode step, one per batch bucket (`key`): the engine's ops between
 * graph_begin(key) and graph_end(key) are recorded instead of run; graph_end instantiates the
 * graph and launches it once, so the step the engine just issued is done exactly as if there
 * had been no capture (and never run twice). Later steps with the same key call
 * graph_launch(key): one launch for the whole step.
 *
 * What a captured step may contain: ops (and the NCCL all-reduce, on the same stream). Not
 * to_device/to_host/logits_stats/alloc/free, which need the host (they die with a message naming
 * the capture). A graph replays the same pointers, sizes and kernel arguments: the engine keeps
 * ids/pos/seq/block_table at fixed device addresses, the token count fixed per bucket, and
 * gather_rows' host row list the same (it is recorded by value). Attention sizes its splits for
 * the block table's capacity while capturing, so the graph stays valid as contexts grow.
 * Capture uses the relaxed mode so the attention scratch may grow (cudaMalloc) mid-capture. */
#include <stdlib.h>

#include "kernels/cuda/cuda_internal.h"

static int find_graph(tp_cuda *c, int key) {
    for (int i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].key == key) return i;
    return -1;
}

int tpc_graph_launch(tp_backend *b, int key) {
    tp_cuda *c = tpc(b);
    if (c->capturing) tp_die("internal: graph_launch(%d) during the capture of graph %d", key, c->capture_key);
    const int i = find_graph(c, key);
    if (i < 0) return 0;
    CUDA_CHECK(cudaGraphLaunch(c->graphs[i].exec, c->stream));
    return 1;
}

void tpc_graph_begin(tp_backend *b, int key) {
    tp_cuda *c = tpc(b);
    if (c->capturing) tp_die("internal: graph_begin(%d) while graph %d is being captured", key, c->capture_key);
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed));
    c->capturing = 1;
    c->capture_key = key;
}

void tpc_graph_end(tp_backend *b, int key) {
    tp_cuda *c = tpc(b);
    if (!c->capturing || c->capture_key != key)
        tp_die("internal: graph_end(%d) without graph_begin(%d)", key, key);
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &g));
    c->capturing = 0;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    int i = find_graph(c, key);
    if (i >= 0) {
        CUDA_CHECK(cudaGraphExecDestroy(c->graphs[i].exec));
    } else {
        if (c->n_graphs == TPC_MAX_GRAPHS)
            tp_die("cuda backend: more than %d graph buckets (keys); use fewer batch buckets", TPC_MAX_GRAPHS);
        i = c->n_graphs++;
    }
    c->graphs[i].key = key;
    c->graphs[i].exec = exec;
    CUDA_CHECK(cudaGraphLaunch(exec, c->stream)); /* the captured step itself */
}

void tpc_graphs_destroy(tp_cuda *c) {
    for (int i = 0; i < c->n_graphs; i++) CUDA_CHECK(cudaGraphExecDestroy(c->graphs[i].exec));
    c->n_graphs = 0;
}
