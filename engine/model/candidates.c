#include "candidates.h"

#include <math.h>

float tp_logsumexp(const float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double se = 0;
    for (int i = 0; i < n; i++) se += exp((double)x[i] - mx);
    return mx + (float)log(se);
}
