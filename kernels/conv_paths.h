#pragma once
// Internal to kernels/: the ways conv.h's convolutions are computed, each giving the bits
// docs/portable.md defines (only the schedule differs; conv_general.cpp picks one):
//   conv.cpp          dilation 1, many positions an example: column matrices read in place from
//                     a phase-split grid (conv_grid.h), a product per example and tile;
//   conv_columns.cpp  dilation 1, few positions an example: explicit column matrices of many
//                     examples side by side, one product per chunk of them;
//   conv_depthwise.cpp  groups = channels: each output's chain over the taps, directly;
//   conv_general.cpp  any dilation: column matrices built explicitly, example by example.

#include "kernels/conv.h"

namespace vt::kernels {

void grid_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                       float* y);
void grid_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                        float* dx, float* dw, float* dbias);

void column_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                         float* y);
void column_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                          float* dx, float* dw, float* dbias);

// Whether a convolution of `groups` groups is depthwise: one input and one output channel a
// group, dilation 1. Then s counts all channels, and w is [C, 1, k...].
bool is_depthwise(const ConvShape& s, std::int64_t groups);
void depthwise_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y);
void depthwise_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                             float* dx, float* dw, float* dbias);

}  // namespace vt::kernels
