//===- SpmModel.cpp - a SentencePiece ModelProto, read --------------------===//

#include "runtime/data/SpmModel.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <cstdint>
#include <cstring>
#include <string_view>

namespace mlc::rt::spm {
namespace {

//===----------------------------------------------------------------------===//
// Protocol buffer wire format
//===----------------------------------------------------------------------===//

/// One field of a message as the wire holds it.
struct Field {
  uint32_t number = 0;
  int wire = 0;       // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t value = 0; // varint and fixed values
  std::string_view bytes;
};

/// Splits a message into its fields. A file that is not a protobuf, or ends
/// inside a field, is an error naming the file and the message.
std::vector<Field> readMessage(std::string_view data, const std::string &file,
                               const std::string &what) {
  std::vector<Field> fields;
  const uint8_t *p = reinterpret_cast<const uint8_t *>(data.data()), *end = p + data.size();
  auto broken = [&](const std::string &why) {
    fail(file + ": " + what + ": " + why + " at byte " +
         std::to_string(p - reinterpret_cast<const uint8_t *>(data.data())) +
         " (not a SentencePiece model, or a truncated or corrupt one)");
  };
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end)
        broken("the data ends inside a number");
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80))
        return v;
    }
    broken("a number longer than 10 bytes");
    return uint64_t(0);
  };
  while (p < end) {
    uint64_t key = varint();
    Field f;
    f.number = uint32_t(key >> 3);
    f.wire = int(key & 7);
    if (f.number == 0)
      broken("field number 0");
    switch (f.wire) {
    case 0:
      f.value = varint();
      break;
    case 1:
    case 5: {
      size_t n = f.wire == 1 ? 8 : 4;
      if (size_t(end - p) < n)
        broken("the data ends inside field " + std::to_string(f.number));
      uint64_t v = 0;
      std::memcpy(&v, p, n); // little-endian, as the wire
      f.value = v;
      p += n;
      break;
    }
    case 2: {
      uint64_t n = varint();
      if (n > uint64_t(end - p))
        broken("field " + std::to_string(f.number) + " claims " + std::to_string(n) +
               " bytes, " + std::to_string(end - p) + " are left");
      f.bytes = std::string_view(reinterpret_cast<const char *>(p), n);
      p += n;
      break;
    }
    default:
      broken("wire type " + std::to_string(f.wire) + " (field " + std::to_string(f.number) +
             ")");
    }
    fields.push_back(f);
  }
  return fields;
}

void expectWire(const Field &f, int wire, const std::string &file, const std::string &path) {
  if (f.wire != wire)
    fail(file + ": " + path + ": wire type " + std::to_string(f.wire) + ", expected " +
         std::to_string(wire) + " (a corrupt SentencePiece model)");
}

} // namespace

ModelFile readModelFile(const std::string &file) {
  std::string bytes = readFile(file);
  ModelFile m;
  auto str = [&](const Field &f, const std::string &path) {
    expectWire(f, 2, file, path);
    return std::string(f.bytes);
  };
  auto flag = [&](const Field &f, const std::string &path) {
    expectWire(f, 0, file, path);
    return f.value != 0;
  };
  for (const Field &f : readMessage(bytes, file, "ModelProto")) {
    if (f.number == 1) {
      std::string path = "pieces[" + std::to_string(m.pieces.size()) + "]";
      expectWire(f, 2, file, path);
      Piece piece;
      for (const Field &g : readMessage(f.bytes, file, path)) {
        if (g.number == 1) {
          piece.text = str(g, path + ".piece");
        } else if (g.number == 2) {
          expectWire(g, 5, file, path + ".score");
          uint32_t u = uint32_t(g.value);
          std::memcpy(&piece.score, &u, 4);
        } else if (g.number == 3) {
          expectWire(g, 0, file, path + ".type");
          piece.type = int(g.value);
          if (piece.type < Normal || piece.type > Byte)
            fail(file + ": " + path + ".type: " + std::to_string(g.value) +
                 " is no piece type (1 normal .. 6 byte)");
        }
      }
      if (piece.text.empty())
        fail(file + ": " + path + ".piece: empty (a piece must have text)");
      m.pieces.push_back(std::move(piece));
    } else if (f.number == 2) {
      expectWire(f, 2, file, "trainer_spec");
      m.hasTrainerSpec = true;
      for (const Field &g : readMessage(f.bytes, file, "trainer_spec")) {
        if (g.number == 3) {
          expectWire(g, 0, file, "trainer_spec.model_type");
          m.modelType = int(g.value);
        } else if (g.number == 24) {
          m.whitespaceAsSuffix = flag(g, "trainer_spec.treat_whitespace_as_suffix");
        } else if (g.number == 35) {
          m.byteFallback = flag(g, "trainer_spec.byte_fallback");
        } else if (g.number == 44) {
          m.unkSurface = str(g, "trainer_spec.unk_surface");
        } else if (g.number == 46) {
          m.bosPiece = str(g, "trainer_spec.bos_piece");
        } else if (g.number == 47) {
          m.eosPiece = str(g, "trainer_spec.eos_piece");
        }
      }
    } else if (f.number == 3 || f.number == 5) {
      std::string path = f.number == 3 ? "normalizer_spec" : "denormalizer_spec";
      expectWire(f, 2, file, path);
      if (f.number == 3)
        m.hasNormalizerSpec = true;
      for (const Field &g : readMessage(f.bytes, file, path)) {
        if (f.number == 5) {
          if (g.number == 2 && !g.bytes.empty())
            fail(file + ": denormalizer_spec.precompiled_charsmap is not supported by mlc "
                        "(it decodes without a denormalization rule)");
          continue;
        }
        if (g.number == 1)
          m.rule = str(g, path + ".name");
        else if (g.number == 2)
          m.charsmap = str(g, path + ".precompiled_charsmap");
        else if (g.number == 3)
          m.addDummyPrefix = flag(g, path + ".add_dummy_prefix");
        else if (g.number == 4)
          m.removeExtraWhitespaces = flag(g, path + ".remove_extra_whitespaces");
        else if (g.number == 5)
          m.escapeWhitespaces = flag(g, path + ".escape_whitespaces");
      }
    }
  }
  // The library writes every message; a file cut short at a field's end
  // parses, but lacks the specs that follow the pieces.
  if (m.pieces.empty() || !m.hasTrainerSpec || !m.hasNormalizerSpec)
    fail(file + ": holds " + std::to_string(m.pieces.size()) + " pieces" +
         (m.hasTrainerSpec ? "" : ", no trainer_spec") +
         (m.hasNormalizerSpec ? "" : ", no normalizer_spec") +
         ": not a complete SentencePiece model (truncated, or not a tokenizer.model)");
  return m;
}

} // namespace mlc::rt::spm
