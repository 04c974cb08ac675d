#pragma once
// gzip (RFC 1952) decompression through zlib, for dataset files people download compressed
// (MNIST's *.gz). The output is bounded before it is allocated: a small hostile file must not
// expand into all of memory.

#include <string>

#include "common/bytes.h"

namespace vt::training {

// Decompresses one or more concatenated gzip members; refuses more than `max_output` bytes.
// Errors name `what` (the file).
Result<Bytes> gunzip(ByteSpan compressed, std::uint64_t max_output, const std::string& what);

}  // namespace vt::training
