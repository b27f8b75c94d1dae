// Fuzz target: the .npy reader (batches, run inputs).
#include "fuzz/FuzzReaders.h"
#include "support/Error.h"
#include "support/TensorIO.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = mlc::fuzz::writeTemp(".npy", data, size);
  try {
    mlc::rt::HostTensor t = mlc::rt::readNpy(path);
    for (int64_t i = 0; i < t.numel() && i < 64; ++i)
      t.getDouble(i);
  } catch (const mlc::rt::Error &) {
  }
  return 0;
}
