// Fuzz target: plan.txt, the package's plan.
#include "support/Error.h"
#include "runtime/core/PlanFormat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    mlc::rt::PlanData plan = mlc::rt::parsePlan(text, "plan.txt");
    mlc::rt::parsePlan(mlc::rt::writePlan(plan), "rewritten plan.txt"); // round trip
  } catch (const mlc::rt::Error &) {
  }
  return 0;
}
