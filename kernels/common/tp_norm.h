/* RMSNorm (HF LlamaRMSNorm), the per-row math shared by both backends:
 *   y = x * inv * g,   inv = 1 / sqrt(sumsq / E + eps),   sumsq = sum over the row of x^2 (f32)
 * HF: variance = x.pow(2).mean(-1) in f32; x * torch.rsqrt(variance + eps). The sum of squares is
 * each backend's own reduction (the CPU adds in its vector order, a GPU block in its tree order: the
 * order, not the formula, differs, ~E 2^-24 relative at worst); from that sum on, every operation is
 * these functions, correctly rounded on both sides (TP_DIV and TP_SQRT, not an approximate rsqrt),
 * so equal sums give equal bits. In f16/bf16 the normalized value is rounded to the dtype before
 * the weight, and the product again (HF's order; backend.h).
 * Edge values, as HF's f32 formula gives them: a row of zeros -> 0 (inv = 1/sqrt(eps)); an x^2 that
 * overflows f32 (|x| > 1.8e19) makes sumsq +inf and inv 0, so y = 0 for the finite x of that row
 * and NaN for an infinite one (inf * 0); a NaN anywhere in the row -> NaN for the whole row. */
#ifndef TPGEN_TP_NORM_H
#define TPGEN_TP_NORM_H

#include "kernels/common/tp_hd.h"

/* One term of the row statistic, sumsq + x^2 in one rounding (both backends may fuse it). */
TP_HD float tp_sumsq_add(float sumsq, float x) { return tp_fmaf(x, x, sumsq); }

/* inv = 1 / sqrt(sumsq / E + eps): the row's scale from its sum of squares. */
TP_HD float tp_rms_inv(float sumsq, int E, float eps) {
    return TP_DIV(1.0f, TP_SQRT(TP_ADD(TP_DIV(sumsq, (float)E), eps)));
}

/* One element: (x * inv) * g, HF's order (the normalized value, then the weight). In f16/bf16 HF
 * rounds the normalized value to the dtype before the weight (`.to(input_dtype)`): a backend does
 * that between the two halves, tp_rms_norm then tp_rms_weight (kernels/backend.h, rmsnorm). */
TP_HD float tp_rms_norm(float x, float inv) { return TP_MUL(x, inv); }
TP_HD float tp_rms_weight(float n, float g) { return TP_MUL(n, g); }
TP_HD float tp_rms_apply(float x, float inv, float g) { return tp_rms_weight(tp_rms_norm(x, inv), g); }

#endif
