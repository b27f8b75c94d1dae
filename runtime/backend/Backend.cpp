//===- Backend.cpp - the backend interface's shared parts -------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/backend/cpu/CpuBackend.h"
#ifdef MLC_HAVE_CUDA
#include "runtime/backend/cuda/CudaBackend.h"
#endif
#include "support/Error.h"
#include "contract/StepFunctions.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace mlc::rt {

Backend::Backend(const Package &pkg)
    : pkg_(pkg), elementSize_(dtypeSize(pkg.dtype.empty() ? "f32" : pkg.dtype)) {
  // One rank's shards until a communicator says otherwise.
  setCommunicator(nullptr);
}

void Backend::setCommunicator(std::shared_ptr<Communicator> comm) {
  comm_ = std::move(comm);
  shards_.clear();
  shardedPlan_ = false;
  momentCount_ = momentCapacity_ = 0;
  auto fn = pkg_.functions.find(kTrainStepFn);
  if (fn == pkg_.functions.end())
    return;
  std::vector<const StepDecl *> buckets;
  for (const StepDecl &s : fn->second.steps)
    if (s.kind == StepDecl::ReduceScatterStart) {
      if (s.tag >= int64_t(buckets.size()))
        buckets.resize(size_t(s.tag) + 1, nullptr);
      buckets[size_t(s.tag)] = &s;
    }
  if (buckets.empty())
    return;
  shardedPlan_ = true;
  for (size_t t = 0; t < buckets.size(); ++t) {
    if (!buckets[t])
      fail(pkg_.dir + "/plan.txt: the reduce-scatter tags skip " + std::to_string(t) +
           " (buckets are tagged 0, 1, ... in layout order)");
    ShardRange r = shardOf(buckets[t]->count, rank(), worldSize());
    shards_.push_back({buckets[t]->offset + r.first, r.count, momentCount_,
                       buckets[t]->offset, buckets[t]->count});
    momentCount_ += r.count;
    momentCapacity_ += shardOf(buckets[t]->count, worldSize() - 1, worldSize()).count;
  }
  shardsLaidOut();
}

std::vector<int64_t> Backend::windows(int64_t shard) const {
  std::vector<int64_t> w;
  for (size_t t = 0; t < shards_.size(); ++t)
    if (shard == StepDecl::kAllShards || shard == int64_t(t))
      w.insert(w.end(), {shards_[t].offset, shards_[t].count, shards_[t].moment});
  if (w.empty())
    fail(pkg_.dir + "/plan.txt: a kernel runs over the shard of bucket " +
         std::to_string(shard) + ", which no reducescatter_start deals");
  return w;
}

void Backend::reduceScatterStart(FlatBuffer, int64_t, int64_t, int) {
  if (comm_ && comm_->size() > 1)
    fail(name() + " backend: the distributed optimizer's collectives are not implemented "
                  "on this device for " + std::to_string(comm_->size()) +
         " ranks (run it on the CPU, or without --use-distributed-optimizer)");
}
void Backend::reduceScatterWait(int) {}
void Backend::allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  reduceScatterStart(which, offset, count, tag);
}
void Backend::allGatherWait(int) {}

Backend::~Backend() = default;

int Backend::worldSize() const { return comm_ ? comm_->size() : 1; }
int Backend::rank() const { return comm_ ? comm_->rank() : 0; }

void Backend::allReduceStart(FlatBuffer, int64_t, int64_t, int) {
  if (comm_ && comm_->size() > 1)
    fail(name() + " backend: this device has no collectives for " +
         std::to_string(comm_->size()) + " ranks");
}
void Backend::allReduceWait(int) {}

/// The attention kernels take sequence n to be tokens cu[n] .. cu[n + 1] of
/// the packed token dimension: offsets that start past 0, decrease or run
/// past the tokens a buffer holds would read and write outside it. A package
/// with a dynamic token dimension holds up to its token capacity; a static
/// one (packed documents) has one offset slot per token, so at most n - 1,
/// and its last offset is n - 1: tokens past it would be in no sequence, yet
/// computed and counted in the loss. (A dynamic batch's last offset is
/// checked against its token count before the run: checkRows.)
static void checkOffsets(const std::string &name, const HostTensor &t, int64_t tokens,
                         bool lastIsTokens) {
  const int64_t n = t.numel();
  if (n < 1 || t.getInt(0) != 0)
    fail("input '" + name + "': sequence offsets must start at 0" +
         (n < 1 ? std::string() : "; got " + std::to_string(t.getInt(0))));
  for (int64_t i = 1; i < n; ++i)
    if (t.getInt(i) < t.getInt(i - 1) || t.getInt(i) > tokens)
      fail("input '" + name + "': offset " + std::to_string(t.getInt(i)) + " at index " +
           std::to_string(i) + (t.getInt(i) > tokens
                                    ? " is past the " + std::to_string(tokens) + " tokens"
                                    : " is below the one before it (" +
                                          std::to_string(t.getInt(i - 1)) + ")"));
  if (lastIsTokens && t.getInt(n - 1) != tokens)
    fail("input '" + name + "': the last offset is " + std::to_string(t.getInt(n - 1)) +
         ", short of the " + std::to_string(tokens) + " tokens: every token must lie in a "
         "sequence (offsets past the last sequence repeat the token count)");
}

std::vector<char> Backend::prepareInput(const std::string &name, const HostTensor &t) {
  const InputInfo *info = nullptr;
  for (const InputInfo &in : pkg_.inputs)
    if (in.name == name)
      info = &in;
  if (!info)
    fail("the model has no input named '" + name + "'");
  if (info->dynamic()) {
    std::vector<int64_t> inner(info->shape.begin() + 1, info->shape.end());
    if (t.shape.empty() || std::vector<int64_t>(t.shape.begin() + 1, t.shape.end()) != inner ||
        t.shape[0] > pkg_.tokenCapacity || t.shape[0] < 1)
      fail("input '" + name + "' has shape " + shapeString(t.shape) + "; the package takes [T" +
           (inner.empty() ? "" : ", ") + shapeString(inner).substr(1) +
           " with 1 <= T <= " + std::to_string(pkg_.tokenCapacity) + " tokens");
    inputRows_[name] = t.shape[0];
    rows_ = t.shape[0];
  } else if (t.shape != info->shape) {
    fail("input '" + name + "' has shape " + shapeString(t.shape) + " but the package was " +
         "compiled for " + shapeString(info->shape));
  }
  int64_t n = t.numel();
  std::vector<char> out(n * dtypeSize(info->dtype));
  char *dst = out.data();
  // Token ids, labels and offsets are integers: a float or bool array would
  // be truncated (3.5 -> 3) without a word.
  bool wantsInt = info->dtype == "i64" || info->dtype == "i32";
  if (wantsInt && t.dtype != "i64" && t.dtype != "i32" && t.dtype != "u16" && t.dtype != "u8")
    fail("input '" + name + "' holds integers (" + info->dtype + "); the array given is " +
         t.dtype);
  if (info->dtype == "i32" && t.dtype == "i64")
    for (int64_t i = 0; i < n; ++i)
      if (t.getInt(i) != int64_t(int32_t(t.getInt(i))))
        fail("input '" + name + "': value " + std::to_string(t.getInt(i)) + " at index " +
             std::to_string(i) + " does not fit in i32");
  if (name == "cu_seqlens") {
    checkOffsets(name, t, pkg_.tokenCapacity > 0 ? pkg_.tokenCapacity : n - 1,
                 /*lastIsTokens=*/pkg_.tokenCapacity == 0);
    cuSeqlensEnd_ = t.getInt(n - 1);
  }
  if (name == "input_ids" || name == "position_ids" || name == "token_type_ids") {
    std::vector<int64_t> &ids = gatheredIds_[name];
    ids.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      ids[size_t(i)] = t.getInt(i);
  }
  if (t.dtype == info->dtype) {
    std::memcpy(dst, t.data.data(), t.data.size());
  } else if (info->dtype == "i64") {
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<int64_t *>(dst)[i] = t.getInt(i);
  } else if (info->dtype == "i32") {
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<int32_t *>(dst)[i] = int32_t(t.getInt(i));
  } else if (info->dtype == "f32") {
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<float *>(dst)[i] = float(t.getDouble(i));
  } else if (info->dtype == "f64") {
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<double *>(dst)[i] = t.getDouble(i);
  } else {
    fail("input '" + name + "': cannot convert " + t.dtype + " to " + info->dtype);
  }
  return out;
}

Backend::BufferPlace Backend::place(const FunctionPlan &fn, int id) const {
  int64_t offset = 0;
  while (fn.buffers[id].kind == BufferDecl::Alias) {
    offset += fn.buffers[id].offset;
    id = fn.buffers[id].alias;
  }
  const BufferDecl &b = fn.buffers[id];
  BufferPlace p;
  auto flatSlice = [&](FlatBuffer which) {
    p.kind = BufferPlace::Flat;
    p.flat = which;
    if (b.name != "*") { // "*": the whole flat buffer
      const ParamInfo *param = pkg_.param(b.name);
      if (!param)
        fail(pkg_.dir + ": function " + fn.name + " refers to unknown parameter " + b.name);
      offset += param->offset * elementSize_;
    }
  };
  switch (b.kind) {
  case BufferDecl::Param:
    flatSlice(FlatBuffer::Params);
    break;
  case BufferDecl::Grad:
    flatSlice(FlatBuffer::Grads);
    break;
  case BufferDecl::Moment1:
  case BufferDecl::Moment2:
    // A sharded plan's moments hold this rank's shards, not the flat layout.
    if (shardedPlan_ && b.name != "*")
      fail(pkg_.dir + ": function " + fn.name + " reads the moments of parameter " + b.name +
           ", but a distributed-optimizer plan holds only this rank's shards of them");
    flatSlice(b.kind == BufferDecl::Moment1 ? FlatBuffer::AdamM : FlatBuffer::AdamV);
    break;
  case BufferDecl::GradSum:
    flatSlice(FlatBuffer::GradSum);
    break;
  case BufferDecl::Scalars: {
    bool known = false;
    for (const ScalarsInfo &s : pkg_.scalars)
      known |= s.name == b.name;
    if (!known)
      fail(pkg_.dir + ": function " + fn.name + " refers to unknown scalars " + b.name);
    p.kind = BufferPlace::Scalars;
    p.name = b.name;
    break;
  }
  case BufferDecl::Input: {
    bool known = false;
    for (const InputInfo &in : pkg_.inputs)
      known |= in.name == b.name;
    if (!known)
      fail(pkg_.dir + ": function " + fn.name + " refers to unknown input " + b.name);
    p.kind = BufferPlace::Input;
    p.name = b.name;
    break;
  }
  case BufferDecl::Arena:
    p.kind = BufferPlace::Arena;
    offset += b.offset;
    break;
  case BufferDecl::Alias:
    break; // followed above
  }
  p.offset = offset;
  return p;
}

bool Backend::weighsAfterRun(const std::string &function) const {
  if (function != kTrainStepFn)
    return false;
  for (const StepDecl &s : pkg_.function(function).steps)
    if (s.kind == StepDecl::AllReduceStart || s.kind == StepDecl::ReduceScatterStart)
      return false;
  return true;
}

void Backend::checkRows() const {
  for (auto &[input, rows] : inputRows_)
    if (rows != rows_)
      fail("the dynamic token dimension differs between inputs: '" + input + "' has " +
           std::to_string(rows) + " tokens, another input " + std::to_string(rows_));
  if (pkg_.tokenCapacity > 0 && cuSeqlensEnd_ >= 0 && !inputRows_.empty() &&
      cuSeqlensEnd_ != rows_)
    fail("input 'cu_seqlens': the last offset is " + std::to_string(cuSeqlensEnd_) +
         ", but the batch holds " + std::to_string(rows_) + " tokens: every token must lie "
         "in a sequence");
}

HostTensor Backend::outputTensor(const std::string &function, const std::string &name,
                                 int &buffer) const {
  const FunctionPlan &fn = pkg_.function(function);
  for (const FunctionPlan::Output &out : fn.outputs) {
    if (out.name != name)
      continue;
    int root = out.buffer;
    while (fn.buffers[root].kind == BufferDecl::Alias)
      root = fn.buffers[root].alias;
    if (fn.buffers[root].kind != BufferDecl::Arena)
      fail("output '" + name + "' is not an arena buffer");
    HostTensor t;
    t.dtype = fn.buffers[root].dtype;
    t.shape = out.shape;
    if (!t.shape.empty() && t.shape[0] < 0)
      t.shape[0] = rows_; // the batch's tokens
    t.data.resize(size_t(t.numel() * dtypeSize(t.dtype)));
    buffer = out.buffer;
    return t;
  }
  fail("function " + function + " has no output '" + name + "'");
}

void failKernelReport(int64_t code, int64_t row, int64_t value, int64_t limit,
                      const GatheredIds &ids) {
  auto holds = [&](const char *input) {
    auto it = ids.find(input);
    return it != ids.end() && row >= 0 && row < int64_t(it->second.size()) &&
           it->second[size_t(row)] == value;
  };
  // The embedding kernel knows only the table's rows: the value tells which
  // input it gathered by (input_ids first: a token out of range is the
  // common case).
  if (code == 1 && !holds("input_ids")) {
    if (holds("position_ids"))
      fail("input 'position_ids': position " + std::to_string(value) + " at index " +
           std::to_string(row) + " is outside the model's " + std::to_string(limit) +
           " positions [0, " + std::to_string(limit) + ")");
    if (holds("token_type_ids"))
      fail("input 'token_type_ids': type id " + std::to_string(value) + " at index " +
           std::to_string(row) + " is outside the model's " + std::to_string(limit) +
           " token types [0, " + std::to_string(limit) + ")");
  }
  if (code == 1)
    fail("token id " + std::to_string(value) + " at position " + std::to_string(row) +
         " is outside the vocabulary [0, " + std::to_string(limit) + ")");
  if (code == 2)
    fail("label " + std::to_string(value) + " at row " + std::to_string(row) +
         " is outside [0, " + std::to_string(limit) + ") and is not the ignore index -100");
  fail("a kernel reported error code " + std::to_string(code));
}

std::string Backend::bufferDtype(const FunctionPlan &fn, int id) const {
  while (fn.buffers[id].kind == BufferDecl::Alias)
    id = fn.buffers[id].alias;
  const BufferDecl &b = fn.buffers[id];
  switch (b.kind) {
  case BufferDecl::Arena:
    return b.dtype;
  case BufferDecl::Input:
    for (const InputInfo &in : pkg_.inputs)
      if (in.name == b.name)
        return in.dtype;
    return "?";
  case BufferDecl::Scalars:
    return "f64";
  default:
    return pkg_.dtype;
  }
}

std::string Backend::gemmDtype(const FunctionPlan &fn, const StepDecl &s) const {
  std::string out = bufferDtype(fn, s.buffers[0]);
  std::string lhs = bufferDtype(fn, s.buffers[1]), rhs = bufferDtype(fn, s.buffers[2]);
  if (s.bias) {
    const BufferDecl &b = fn.buffers.at(size_t(s.buffers[3]));
    const std::string bias = bufferDtype(fn, s.buffers[3]);
    if (bias != out || b.bytes < s.n * int64_t(dtypeSize(out)))
      fail(pkg_.dir + "/plan.txt: function " + fn.name + " has a GEMM whose bias is " +
           std::to_string(b.bytes) + " bytes of " + bias + "; it adds " + std::to_string(s.n) +
           " elements of " + out + " to every row");
  }
  if (s.gelu) {
    const BufferDecl &p = fn.buffers.at(size_t(s.buffers.back()));
    const BufferDecl &o = fn.buffers.at(size_t(s.buffers[0]));
    if (bufferDtype(fn, s.buffers.back()) != out ||
        (out != "f32" && out != "f64" && out != "bf16") || p.bytes < o.bytes)
      fail(pkg_.dir + "/plan.txt: function " + fn.name + " has a GEMM with a GELU whose "
           "pre-activation is " + std::to_string(p.bytes) + " bytes of " +
           bufferDtype(fn, s.buffers.back()) + "; it takes the result's " +
           std::to_string(o.bytes) + " bytes of f32, f64 or bf16");
  }
  if (lhs == "bf16" && rhs == "bf16" && out == "f32")
    return "bf16-f32";
  if (lhs != out || rhs != out || (out != "f32" && out != "f64" && out != "bf16"))
    fail(pkg_.dir + "/plan.txt: function " + fn.name + " has a GEMM of " + lhs + " x " + rhs +
         " -> " + out + "; GEMMs take f32, f64 or bf16, one type for all three, or bf16 "
         "operands with an f32 result");
  return out;
}

std::unique_ptr<Backend> createBackend(const std::string &device, const Package &pkg,
                                       bool verbose) {
  if (device == "cpu")
    return std::make_unique<CpuBackend>(pkg, verbose);
#ifdef MLC_HAVE_CUDA
  if (device == "cuda-emulator")
    return createCudaBackend(pkg, verbose, /*emulated=*/true);
  if (device == "cuda")
    return createCudaBackend(pkg, verbose);
  if (device == "auto" || device.empty()) {
    std::string why;
    if (cudaAvailable(&why))
      return createCudaBackend(pkg, verbose);
    if (verbose)
      std::fprintf(stderr, "mlc: --device auto: %s; running on the CPU\n", why.c_str());
    return std::make_unique<CpuBackend>(pkg, verbose);
  }
  fail("unknown device '" + device + "' (this build has: auto, cpu, cuda, cuda-emulator)");
#else
  if (device == "auto" || device.empty())
    return std::make_unique<CpuBackend>(pkg, verbose);
  if (device == "cuda" || device == "cuda-emulator")
    fail("--device " + device + ": this build of mlc has no CUDA backend (it was built "
         "without the CUDA toolkit's headers); use --device cpu");
  fail("unknown device '" + device + "' (this build has: auto, cpu)");
#endif
}

/// Elements of a flat buffer on this rank.
static int64_t flatCount(const Backend &backend, FlatBuffer which) {
  return which == FlatBuffer::AdamM || which == FlatBuffer::AdamV ? backend.momentCount()
                                                                  : backend.package().paramCount;
}

double Backend::sumOfSquares(FlatBuffer which, int64_t offset, int64_t count) {
  const int64_t es = elementSize();
  double sum = 0;
  std::vector<char> chunk;
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min<int64_t>(count - done, int64_t(1) << 20);
    chunk.resize(size_t(n * es));
    download(which, (offset + done) * es, chunk.data(), n * es);
    for (int64_t i = 0; i < n; ++i) {
      const double g = floatAt(chunk.data(), i, es);
      sum += g * g;
    }
    done += n;
  }
  return sum;
}

std::vector<char> downloadAll(Backend &backend, FlatBuffer which) {
  std::vector<char> host(flatCount(backend, which) * backend.elementSize());
  backend.download(which, 0, host.data(), host.size());
  return host;
}

void uploadAll(Backend &backend, FlatBuffer which, const std::vector<char> &host) {
  int64_t bytes = flatCount(backend, which) * backend.elementSize();
  if (int64_t(host.size()) != bytes)
    fail("internal: a flat buffer of " + std::to_string(host.size()) + " bytes where the " +
         "package needs " + std::to_string(bytes));
  backend.upload(which, 0, host.data(), bytes);
}

void Backend::requireTensorParallelGroup() const {
  if (!tp_ || tp_->size() != pkg_.tensorParallel)
    fail(pkg_.dir + " is one rank of a tensor-parallel group of " +
         std::to_string(pkg_.tensorParallel) + " ranks; this run has " +
         std::to_string(tpSize()) + " (train it with --tensor-parallel " +
         std::to_string(pkg_.tensorParallel) + ")");
}

std::pair<int64_t, int> Backend::tpSliceElements(const FunctionPlan &fn,
                                                 const StepDecl &s) const {
  StepDecl slice = s;
  slice.buffers = {s.buffers.at(s.kind == StepDecl::TpAllGather ? 1 : 0)};
  return tpAllReduceElements(fn, slice);
}

void Backend::tpSlices(const FunctionPlan &fn, const StepDecl &s, void *out, const void *in) {
  requireTensorParallelGroup();
  auto [count, es] = tpSliceElements(fn, s);
  if (s.kind == StepDecl::TpAllGather)
    tp_->allGather(in, out, count, es == 8);
  else
    tp_->reduceScatter(in, out, count, es == 8);
}

std::pair<int64_t, int> Backend::tpAllReduceElements(const FunctionPlan &fn,
                                                     const StepDecl &s) const {
  const BufferDecl &b = fn.buffers[size_t(s.buffers.at(0))];
  const std::string dtype =
      b.kind == BufferDecl::Arena || b.kind == BufferDecl::Alias ? b.dtype
                                                                  : bufferDtype(fn, s.buffers[0]);
  if (dtype != "f32" && dtype != "f64")
    fail(pkg_.dir + ": a tensor-parallel all-reduce over a " + dtype +
         " buffer (the runtime sums f32 and f64)");
  const int es = dtype == "f64" ? 8 : 4;
  return {b.bytes / es, es};
}

void Backend::tpAllReduce(const FunctionPlan &fn, const StepDecl &s, void *data) {
  requireTensorParallelGroup();
  auto [count, es] = tpAllReduceElements(fn, s);
  // Not counted in profile.commWaitSeconds: that is the data-parallel
  // sums' exposed time, which the run's summary reports.
  if (s.async) {
    tp_->tpAllReduceStart(data, count, es == 8, int(s.tag));
    ++tpOutstanding_;
    return;
  }
  tp_->allReduce(data, count, es == 8, s.max);
}

void Backend::tpWait(const StepDecl &s) {
  requireTensorParallelGroup();
  tp_->tpAllReduceWait(int(s.tag));
  --tpOutstanding_;
}

bool Backend::startOrWaitCollective(const StepDecl &s) {
  switch (s.kind) {
  case StepDecl::AllReduceStart:
    prepareBucket(s.offset, s.count, s.clip);
    allReduceStart(FlatBuffer::Grads, s.offset, s.count, int(s.tag));
    return true;
  case StepDecl::AllReduceWait:
    allReduceWait(int(s.tag));
    return true;
  case StepDecl::ReduceScatterStart:
    prepareBucket(s.offset, s.count, s.clip);
    reduceScatterStart(FlatBuffer::Grads, s.offset, s.count, int(s.tag));
    return true;
  case StepDecl::ReduceScatterWait:
    reduceScatterWait(int(s.tag));
    return true;
  case StepDecl::AllGatherStart:
    allGatherStart(FlatBuffer::Params, s.offset, s.count, int(s.tag));
    return true;
  case StepDecl::AllGatherWait:
    allGatherWait(int(s.tag));
    return true;
  case StepDecl::TpAllReduce: // each backend runs it where its buffers live, before this
  case StepDecl::TpWait:
    fail("internal: " + name() + " backend: a tensor-parallel all-reduce reached the "
         "data-parallel collectives");
  case StepDecl::TpAllGather: // each backend runs them where its buffers live
  case StepDecl::TpReduceScatter:
    fail("internal: " + name() + " backend: a sequence-parallel all-gather or reduce-scatter "
         "reached the data-parallel collectives");
  default:
    return false;
  }
}

} // namespace mlc::rt
