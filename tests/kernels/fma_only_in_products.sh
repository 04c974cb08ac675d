#!/bin/sh
# The portable kernels fuse a multiply-add in one place only: a product chain, in the gemm inner
# loops (kernels/gemm_micro.h; docs/portable.md, "Matrix products") and the depthwise
# convolution's (kernels/depthwise_micro.h), built beside them. Everywhere else
# the build forbids contraction. Fails when an FMA instruction lies in any other function, or
# when the inner loops hold none (then the check would prove nothing).
# Usage: fma_only_in_products.sh LIBRARY
set -eu
objdump -d -C --no-show-raw-insn "$1" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  tolower($0) ~ /\tvf(n)?m(add|sub)[0-9]/ {
    if (fn ~ /vt::kernels::(avx512|avx512_narrow|avx2|generic)::\(anonymous namespace\)::(micro|run|depthwise_[a-z_]+)[<(]/) {
      inner++
    } else {
      print "FMA outside a product loop: " fn; stray++
    }
  }
  END {
    if (inner == 0) { print "no FMA in the product loops"; exit 1 }
    if (stray > 0) exit 1
    print inner " FMA instructions, all in the product loops"
  }'
