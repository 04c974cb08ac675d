#pragma once
// Softmax and cross-entropy in the portable arithmetic (docs/portable.md, "Softmax",
// "Cross-entropy"), over the last dimension of row-major [rows, width] data. Threads split
// rows; every sum over a row is one chain in column order.

#include <cstdint>

namespace vt::kernels {

// y = softmax(x / divisor) over each row's first `valid(r)` columns; the rest are +0.0.
// Causal attention: row r is query i = r mod width, which sees keys 0..i (causal = true);
// otherwise every column is valid.
void softmax(std::int64_t rows, std::int64_t width, const float* x, float divisor, bool causal,
             float* y);
// dx from y = softmax(x / divisor) and dy: (y·(dy − Σ dy·y)) / divisor on valid columns, +0.0
// elsewhere.
void softmax_backward(std::int64_t rows, std::int64_t width, const float* y, const float* dy,
                      float divisor, bool causal, float* dx);

// y = x − (m + log Σ exp(x − m)) per row (m the row's largest); backward
// dx = dy − exp(y)·(chain of dy).
void log_softmax(std::int64_t rows, std::int64_t width, const float* x, float* y);
void log_softmax_backward(std::int64_t rows, std::int64_t width, const float* y, const float* dy,
                          float* dx);

// Mean cross-entropy of logits [rows, classes] against class ids; ids outside [0, classes)
// must be refused by the caller. Saves each row's max and Σ exp for backward.
float cross_entropy(std::int64_t rows, std::int64_t classes, const float* logits,
                    const std::int64_t* targets, float* row_max, float* row_sum);
// dlogits = (softmax − one_hot) · (dloss / rows).
void cross_entropy_backward(std::int64_t rows, std::int64_t classes, const float* logits,
                            const std::int64_t* targets, const float* row_max, const float* row_sum,
                            float dloss, float* dlogits);

}  // namespace vt::kernels
