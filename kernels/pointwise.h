#pragma once
// Element-wise operations and small reductions in the portable arithmetic (docs/portable.md).
// Threads and vector lanes split elements; where a value is a sum, it is one chain in the
// order the elements are stored.

#include <cstdint>

namespace vt::kernels {

// y[r][c] = y[r][c] + bias[c]: the bias of linear (and convolution) layers, one rounding.
void add_bias(std::int64_t rows, std::int64_t cols, float* y, const float* bias);

// y = x if x > 0 (or NaN), else +0.0; dx = dy where y > 0 (or NaN), else +0.0.
void relu(std::int64_t n, const float* x, float* y);
void relu_backward(std::int64_t n, const float* y, const float* dy, float* dx);

// GELU, erf form (scalar.h's vt_gelu and vt_gelu_grad).
void gelu(std::int64_t n, const float* x, float* y);
void gelu_backward(std::int64_t n, const float* x, const float* dy, float* dx);

// Dropout with probability p: element i is kept when uniform_of(draw i) >= p, where draw i is
// stream_at(state, (call << 40) + i); kept elements are scaled by 1 / (1 − p). The same mask
// again for backward: dx = dy · scale where kept, +0.0 elsewhere. n < 2^40.
void dropout(std::int64_t n, const float* x, float p, std::uint64_t state, std::uint64_t call,
             float* y);
void dropout_backward(std::int64_t n, const float* dy, float p, std::uint64_t state,
                      std::uint64_t call, float* dx);

// Feature dropout over x [B, C, S]: channel (b, c) is kept when uniform_of(draw (call << 40) +
// b·C + c) >= p, all its S values alike; kept values are scaled by 1 / (1 − p).
void feature_dropout(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                     const float* x, float p, std::uint64_t state, std::uint64_t call, float* y);
void feature_dropout_backward(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                              const float* dy, float p, std::uint64_t state, std::uint64_t call,
                              float* dx);
// y[j] = 1 when uniform_of(draw (call << 40) + j) < p, else 0 (bernoulli_(p): stochastic depth).
void bernoulli(std::int64_t n, float p, std::uint64_t state, std::uint64_t call, float* y);
// y[j] = 1 when uniform_of(draw (call << 40) + j) < p[j], else 0 (torch.bernoulli(p)).
void bernoulli_of(std::int64_t n, const float* p, std::uint64_t state, std::uint64_t call,
                  float* y);
// y[j] = uniform_of(draw (call << 40) + j), in [0, 1) (torch.rand, rand_like, rrelu's slopes).
void uniform(std::int64_t n, std::uint64_t state, std::uint64_t call, float* y);
// y[j] = low + ⌊draw (call << 40) + j · (high − low) / 2^64⌋, in [low, high), integers (a
// multiply-high of the whole 64-bit draw: torch.randint). high > low.
void randint(std::int64_t n, std::int64_t low, std::int64_t high, std::uint64_t state,
             std::uint64_t call, std::int64_t* y);
// y[j] standard normal by Box-Muller from draws (call << 40) + 2j and + 2j + 1 over vt_log, sqrt
// and a quarter-period cosine of our own (docs/portable.md, "Random operators"): torch.randn,
// randn_like, normal_.
void normal(std::int64_t n, std::uint64_t state, std::uint64_t call, float* y);

// The mean over the last dimension: y[r] = (chain over j of x[r][j]) / width.
void row_mean(std::int64_t rows, std::int64_t width, const float* x, float* y);
// dx[r][j] = dy[r] / width.
void row_mean_backward(std::int64_t rows, std::int64_t width, const float* dy, float* dx);

// Mean squared error: (chain over i of (a − b)²) / n; backward d = (a − b) · ((2·dloss) / n).
float mse(std::int64_t n, const float* a, const float* b);
void mse_backward(std::int64_t n, const float* a, const float* b, float dloss, float* da);

// Embedding rows: y[i] = table[ids[i]] (ids checked by the caller).
void embedding(std::int64_t count, std::int64_t width, const std::int64_t* ids, const float* table,
               float* y);
// dtable = +0.0, then for i in order: dtable[ids[i]] += dy[i] (threads split the columns, so
// each entry's additions keep the order of i).
void embedding_backward(std::int64_t count, std::int64_t width, std::int64_t rows,
                        const std::int64_t* ids, const float* dy, float* dtable);

}  // namespace vt::kernels
