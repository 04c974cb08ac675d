#pragma once
// Internal to kernels/: the two ways conv.h's convolutions are computed, each giving the bits
// docs/portable.md defines. conv.cpp: dilation 1, column matrices read in place from a
// phase-split grid (fast). conv_general.cpp: any dilation, column matrices built explicitly.

#include "kernels/conv.h"

namespace vt::kernels {

void undilated_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y);
void undilated_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                             float* dx, float* dw, float* dbias);

}  // namespace vt::kernels
