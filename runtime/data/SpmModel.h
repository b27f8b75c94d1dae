//===- SpmModel.h - a SentencePiece ModelProto, read -----------*- C++ -*-===//
//
// The fields of a SentencePiece `tokenizer.model` (the protobuf ModelProto
// of the library's sentencepiece_model.proto) that encoding and decoding
// read, from the wire format itself: no protobuf library. Every error names
// the file and the field; a file that is not a complete ModelProto (cut
// short, empty, another format) is refused.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_SPMMODEL_H
#define MLC_RUNTIME_SPMMODEL_H

#include <string>
#include <vector>

namespace mlc::rt::spm {

enum PieceType { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Piece {
  std::string text;
  float score = 0;
  int type = Normal;
};

/// The fields of ModelProto that encoding and decoding read.
struct ModelFile {
  std::vector<Piece> pieces;
  int modelType = 1; // UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4
  bool byteFallback = false, whitespaceAsSuffix = false;
  std::string bosPiece = "<s>", eosPiece = "</s>", unkSurface = " \xE2\x81\x87 ";
  std::string rule;         // normalizer_spec.name
  std::string charsmap;     // normalizer_spec.precompiled_charsmap
  bool addDummyPrefix = true, removeExtraWhitespaces = true, escapeWhitespaces = true;
  bool hasTrainerSpec = false, hasNormalizerSpec = false;
};

/// Reads `file`; see the header for what is refused.
ModelFile readModelFile(const std::string &file);

} // namespace mlc::rt::spm

#endif // MLC_RUNTIME_SPMMODEL_H
