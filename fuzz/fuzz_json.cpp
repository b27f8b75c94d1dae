// Fuzz target: the JSON reader (manifests, safetensors headers, JSONL lines).
#include "support/Error.h"
#include "support/Json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  for (bool unique : {false, true}) {
    try {
      mlc::rt::Json::parse(text, "input", unique);
    } catch (const mlc::rt::Error &) {
    }
  }
  return 0;
}
