// Fuzz target: Megatron indexed datasets (.idx with its .bin). The first two
// bytes give the size of the .idx; the rest is the .bin.
#include "fuzz/FuzzReaders.h"
#include "support/Error.h"
#include "runtime/data/IndexedDataset.h"

#include <algorithm>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t idx = std::min<size_t>(size - 2, size_t(data[0]) | size_t(data[1]) << 8);
  std::string prefix = mlc::fuzz::writeTemp(".idx", data + 2, idx);
  prefix.resize(prefix.size() - 4);
  mlc::fuzz::writeTemp(".bin", data + 2 + idx, size - 2 - idx);
  try {
    mlc::rt::IndexedDataset d(prefix);
    std::vector<int64_t> tokens;
    for (int64_t s = 0; s < d.sequences() && s < 256; ++s)
      d.read(s, tokens);
    for (int64_t doc = 0; doc <= d.documents(); ++doc)
      d.documentStart(doc);
  } catch (const mlc::rt::Error &) {
  }
  return 0;
}
