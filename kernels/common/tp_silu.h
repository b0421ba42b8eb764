/* SiLU (HF's nn.SiLU, LLaMA's MLP gate), shared by both backends:
 *   silu(z) = z * sigmoid(z) = z / (1 + exp(-z))
 * with the exp of tp_act.h (f32 operations only, within 1.05 ulp of exp; a CPU loop of it
 * vectorizes), so the CPU and the CUDA backend compute the same bits. Edge values: large negative
 * z -> -0 (exp(-z) = +inf), large positive z -> z, NaN -> NaN. Within a few ulp of torch's f32
 * silu (tests/ops). */
#ifndef TPGEN_TP_SILU_H
#define TPGEN_TP_SILU_H

#include "kernels/common/tp_act.h"

TP_HD float tp_silu(float z) { return TP_DIV(z, TP_ADD(1.0f, tp_expf(-z))); }

#endif
