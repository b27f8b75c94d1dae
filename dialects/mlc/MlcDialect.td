//===- MlcDialect.td - the mlc graph dialect ---------------*- tablegen -*-===//
//
// The graph level of mlc: value-semantic tensor ops that describe a model's
// forward pass (and, after autodiff, its whole training step).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECT_TD
#define MLC_DIALECT_TD

include "mlir/IR/OpBase.td"

def Mlc_Dialect : Dialect {
  let name = "mlc";
  let cppNamespace = "::mlc";
  let summary = "Tensor graph of a transformer training step";
  let description = [{
    The `mlc` dialect holds the model graph that mlc compiles: ops over ranked
    tensors with value semantics, numpy broadcasting for the binary pointwise ops,
    and result types inferred from the operands. Hidden sizes are static; batch
    and token dimensions may be dynamic (`?`). Every op verifies its operands
    (element types, ranks, broadcasting, attribute ranges) and names the rule it
    broke.
  }];
  let hasConstantMaterializer = 1;
}

class Mlc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mlc_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Mlc_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Mlc_IntTensor : RankedTensorOf<[I32, I64]>;
def Mlc_BoolTensor : RankedTensorOf<[I1]>;
def Mlc_AnyTensor : RankedTensorOf<[AnyFloat, AnySignlessInteger]>;
def Mlc_NumericTensor : RankedTensorOf<[AnyFloat, I32, I64]>;

#endif // MLC_DIALECT_TD
