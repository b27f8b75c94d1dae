//===- Nvrtc.cpp - NVRTC through dlopen -------------------------------------===//
//
// The few NVRTC entry points mlc uses, declared here with their documented C
// signatures (nvrtc.h is not needed to build).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/Nvrtc.h"
#include "support/Error.h"

#include <dlfcn.h>
#include <mutex>
#include <regex>
#include <sstream>

namespace mlc::rt {

namespace {
using Program = struct NvrtcProgramOpaque *;
} // namespace

struct Nvrtc::Api {
  int (*version)(int *, int *);
  int (*create)(Program *, const char *, const char *, int, const char *const *,
                const char *const *);
  int (*compile)(Program, int, const char *const *);
  int (*logSize)(Program, size_t *);
  int (*log)(Program, char *);
  int (*cubinSize)(Program, size_t *);
  int (*cubin)(Program, char *);
  int (*ptxSize)(Program, size_t *);
  int (*ptx)(Program, char *);
  int (*destroy)(Program *);
  const char *(*errorString)(int);
};

Nvrtc *Nvrtc::get(std::string *why) {
  static std::once_flag once;
  static Nvrtc *instance = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    void *lib = nullptr;
    for (const char *name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      reason = "NVRTC (libnvrtc.so.13 or .12) is not installed or not on the library path";
      return;
    }
    auto *api = new Api();
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) {
        ok = false;
        reason = std::string("NVRTC lacks ") + name;
      }
    };
    sym(api->version, "nvrtcVersion");
    sym(api->create, "nvrtcCreateProgram");
    sym(api->compile, "nvrtcCompileProgram");
    sym(api->logSize, "nvrtcGetProgramLogSize");
    sym(api->log, "nvrtcGetProgramLog");
    sym(api->cubinSize, "nvrtcGetCUBINSize");
    sym(api->cubin, "nvrtcGetCUBIN");
    sym(api->ptxSize, "nvrtcGetPTXSize");
    sym(api->ptx, "nvrtcGetPTX");
    sym(api->destroy, "nvrtcDestroyProgram");
    sym(api->errorString, "nvrtcGetErrorString");
    if (!ok) {
      delete api;
      return;
    }
    instance = new Nvrtc();
    instance->api_ = api;
  });
  if (!instance && why)
    *why = reason;
  return instance;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

Nvrtc::Output Nvrtc::compile(const std::string &source, const std::string &name,
                             const std::string &arch, bool verbose) const {
  Program prog = nullptr;
  if (int rc = api_->create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr))
    fail("NVRTC cannot create a program for " + name + ": " + api_->errorString(rc));
  // 177/550: variables a kernel's shared prologue declares but one phase
  // does not use.
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "--std=c++17",
                                      "-diag-suppress=177,550"};
  if (verbose)
    options.push_back("--ptxas-options=-v");
  else
    options.push_back("--split-compile=0"); // every core (a package has 100+ kernels)
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  int rc = api_->compile(prog, int(argv.size()), argv.data());
  Output out;
  size_t n = 0;
  api_->logSize(prog, &n);
  out.log.assign(n, '\0');
  api_->log(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0')
    out.log.pop_back();
  if (rc != 0) {
    api_->destroy(&prog);
    fail("NVRTC " + version() + " failed on " + name + " for " + arch + " (" +
         api_->errorString(rc) + "):\n" + out.log.substr(0, 4000));
  }
  bool cubin = arch.rfind("sm_", 0) == 0;
  n = 0;
  (cubin ? api_->cubinSize : api_->ptxSize)(prog, &n);
  out.image.assign(n, '\0');
  (cubin ? api_->cubin : api_->ptx)(prog, out.image.data());
  api_->destroy(&prog);
  return out;
}

std::map<std::string, PtxasStats> parsePtxasLog(const std::string &log) {
  std::map<std::string, PtxasStats> out;
  std::istringstream in(log);
  std::string line, current;
  static const std::regex entry("Compiling entry function '([^']+)'"),
      props("Function properties for (\\S+)"),
      frame("(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads"),
      used("Used (\\d+) registers"), smem("(\\d+) bytes smem");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      current = m[1];
      out[current];
    } else if (!current.empty() && std::regex_search(line, m, frame)) {
      out[current].stackBytes = std::stoll(m[1]);
      out[current].spillStores = std::stoll(m[2]);
      out[current].spillLoads = std::stoll(m[3]);
    } else if (!current.empty() && std::regex_search(line, m, used)) {
      out[current].registers = std::stoll(m[1]);
      if (std::regex_search(line, m, smem))
        out[current].sharedBytes = std::stoll(m[1]);
    }
  }
  return out;
}

} // namespace mlc::rt
