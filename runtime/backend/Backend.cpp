//===- Backend.cpp - the backend interface's shared parts -------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/core/Error.h"

namespace mlc::rt {

Backend::Backend(const Package &pkg)
    : pkg_(pkg), elementSize_(dtypeSize(pkg.dtype.empty() ? "f32" : pkg.dtype)) {}

Backend::~Backend() = default;

int Backend::worldSize() const { return comm_ ? comm_->size() : 1; }
int Backend::rank() const { return comm_ ? comm_->rank() : 0; }

void Backend::allReduceStart(FlatBuffer, int64_t, int64_t, int) {
  if (comm_ && comm_->size() > 1)
    fail(name() + " backend: this device has no collectives for " +
         std::to_string(comm_->size()) + " ranks");
}
void Backend::allReduceWait(int) {}

std::unique_ptr<Backend> createBackend(const std::string &device, const Package &pkg,
                                       bool verbose) {
  if (device == "cpu" || device == "auto" || device.empty())
    return std::make_unique<CpuBackend>(pkg, verbose);
  if (device == "cuda-emulator")
    return std::make_unique<CpuBackend>(pkg, verbose, /*emulateCuda=*/true);
  if (device == "cuda")
    fail("--device cuda: this build of mlc has no CUDA backend yet; use --device cpu");
  fail("unknown device '" + device + "' (this build has: cpu, auto, cuda-emulator)");
}

std::vector<char> downloadAll(Backend &backend, FlatBuffer which) {
  std::vector<char> host(backend.package().paramCount * backend.elementSize());
  backend.download(which, 0, host.data(), host.size());
  return host;
}

void uploadAll(Backend &backend, FlatBuffer which, const std::vector<char> &host) {
  int64_t bytes = backend.package().paramCount * backend.elementSize();
  if (int64_t(host.size()) != bytes)
    fail("internal: a flat buffer of " + std::to_string(host.size()) + " bytes where the " +
         "package needs " + std::to_string(bytes));
  backend.upload(which, 0, host.data(), bytes);
}

} // namespace mlc::rt
