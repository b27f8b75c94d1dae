//===- ProducerCopy.h - a cast that its producer's kernel stores -*- C++ -*-===//
//
// mlc-fold-casts marks a cast (f32 to bf16) of a norm gradient's input
// gradient dx with this unit attribute: the gradient's kernel writes the
// bf16 copy as a second store of dx. mlc-fuse-elementwise leaves a marked
// cast out of every fusion, and the lowering emits it with its producer.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_PRODUCERCOPY_H
#define MLC_PASSES_PRODUCERCOPY_H

#include "llvm/ADT/StringRef.h"

namespace mlc {

inline constexpr llvm::StringLiteral kProducerCopyAttr = "mlc.producer_copy";

/// mlc-fold-casts marks a widening cast (bf16 to f32) of a product that a
/// norm gradient reads as its incoming gradient: the gradient's kernel
/// loads the bf16 product and converts it, so no fusion takes the cast and
/// the lowering emits no kernel for it.
inline constexpr llvm::StringLiteral kConsumerLoadAttr = "mlc.consumer_load";

} // namespace mlc

#endif // MLC_PASSES_PRODUCERCOPY_H
