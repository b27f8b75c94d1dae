// Fuzz target: the safetensors reader (weights, checkpoints).
#include "fuzz/FuzzReaders.h"
#include "support/Error.h"
#include "support/TensorIO.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = mlc::fuzz::writeTemp(".safetensors", data, size);
  try {
    mlc::rt::readSafetensors(path);
  } catch (const mlc::rt::Error &) {
  }
  return 0;
}
