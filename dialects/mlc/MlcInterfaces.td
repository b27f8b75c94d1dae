//===- MlcInterfaces.td - interfaces of the mlc dialect ----*- tablegen -*-===//

#ifndef MLC_INTERFACES_TD
#define MLC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Mlc_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    The reverse-mode rule of an op: given the adjoint (gradient of the loss)
    of each result, emit ops that compute the adjoint of each operand. The
    rule lives with its op; `mlc-autodiff` only walks the graph backwards,
    calls the rules and sums adjoints of values used more than once.
  }];
  let cppNamespace = "::mlc";
  let methods = [
    InterfaceMethod<[{
        Emits the vector-Jacobian product at the builder's insertion point.
        `resultGrads` has one entry per result, null where a result has no
        adjoint (it does not reach the loss). Fills `operandGrads` with one
        entry per operand, null where the operand has no gradient (integer
        indices, masks). Every non-null gradient has its operand's type.
      }],
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Mlc_ScalarOpInterface : OpInterface<"ScalarOpInterface"> {
  let description = [{
    An elementwise op: each result element is a function of the operands'
    elements at the same (broadcast) position. These are the ops that
    `mlc-fuse-elementwise` fuses and that every kernel writes as one scalar
    expression; the list of such ops is the list of ops with this interface.
  }];
  let cppNamespace = "::mlc";
  let methods = [
    InterfaceMethod<[{
        The op's per-element value as an expression over `operands` (one
        expression per operand, already of the operand's element type),
        spelled through the target's `emitter`.
      }],
      "std::string", "scalarExpr",
      (ins "::mlc::ScalarEmitter &":$emitter,
           "::llvm::ArrayRef<std::string>":$operands)>
  ];
}

#endif // MLC_INTERFACES_TD
