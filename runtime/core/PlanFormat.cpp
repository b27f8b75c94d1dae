//===- PlanFormat.cpp - reading plan.txt -----------------------------------===//

#include "runtime/core/PlanFormat.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

namespace mlc::rt {

namespace {

/// Sizes are products of dimensions: refuse any that overflow.
int64_t product(const std::vector<int64_t> &s, int64_t capacity, bool &overflow) {
  int64_t n = 1;
  for (int64_t d : s) {
    int64_t x = d < 0 ? capacity : d;
    if (x < 0 || (x && n > std::numeric_limits<int64_t>::max() / x)) {
      overflow = true;
      return 0;
    }
    n *= x;
  }
  return n;
}

} // namespace

std::string shapeText(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string t;
  for (size_t i = 0; i < shape.size(); ++i)
    t += (i ? "x" : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return t;
}

std::vector<int64_t> parseShape(const std::string &text) {
  std::vector<int64_t> shape;
  if (text == "scalar")
    return shape;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, 'x')) {
    if (item == "?") {
      shape.push_back(-1);
      continue;
    }
    char *end = nullptr;
    errno = 0;
    long long d = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || errno == ERANGE || d < 1)
      fail("malformed shape '" + text + "'");
    shape.push_back(d);
  }
  if (shape.empty())
    fail("malformed shape '" + text + "'");
  return shape;
}

/// A collective step's directive.
const char *collectiveName(StepDecl::Kind kind) {
  switch (kind) {
  case StepDecl::AllReduceStart:
    return "allreduce_start";
  case StepDecl::AllReduceWait:
    return "allreduce_wait";
  case StepDecl::ReduceScatterStart:
    return "reducescatter_start";
  case StepDecl::ReduceScatterWait:
    return "reducescatter_wait";
  case StepDecl::AllGatherStart:
    return "allgather_start";
  case StepDecl::AllGatherWait:
    return "allgather_wait";
  default:
    return "?";
  }
}

namespace {

/// Reads plan.txt line by line: one member per directive, each failing with
/// the file and line of what it cannot accept.
class PlanParser {
public:
  explicit PlanParser(std::string path) : path(std::move(path)) {}

  PlanData parse(const std::string &text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      ++lineNo;
      std::istringstream ls(line);
      std::string word;
      if (ls >> word)
        directive(word, ls);
    }
    if (fn)
      fail(path + ": function " + fn->name + " has no 'end' line (the file is truncated)");
    return std::move(plan);
  }

private:
  [[noreturn]] void bad(const std::string &msg) const {
    fail(path + ":" + std::to_string(lineNo) + ": " + msg);
  }

  /// tp_allgather / tp_reducescatter %OUT %IN: the whole buffer holds T
  /// slices of the other, of one element type.
  void tpSlices(const std::string &word, std::istringstream &ls) {
    StepDecl s;
    s.kind = word == "tp_allgather" ? StepDecl::TpAllGather : StepDecl::TpReduceScatter;
    std::string out, in;
    if (!(ls >> out >> in))
      bad("malformed " + word + " line (%OUT %IN)");
    if (plan.tensorParallel < 2)
      bad(word + " in a plan without tensor_parallel");
    requireNoneInFlight(word);
    s.buffers = {bufferId(out), bufferId(in)};
    const BufferDecl &o = fn->buffers[size_t(s.buffers[0])], &i = fn->buffers[size_t(s.buffers[1])];
    const int bytes = bufferElementBytes(o);
    if ((bytes != 4 && bytes != 8) || bufferElementBytes(i) != bytes)
      bad(word + " moves f32 or f64 buffers of one type");
    const BufferDecl &slice = s.kind == StepDecl::TpAllGather ? i : o;
    const BufferDecl &whole = s.kind == StepDecl::TpAllGather ? o : i;
    if (whole.bytes != slice.bytes * plan.tensorParallel)
      bad(word + ": the whole buffer (" + std::to_string(whole.bytes) + " bytes) is not " +
          std::to_string(plan.tensorParallel) + " slices of " + std::to_string(slice.bytes) +
          " bytes");
    fn->steps.push_back(s);
  }

  void directive(const std::string &word, std::istringstream &ls) {
    if (lineNo == 1)
      return header(word, ls);
    if (word == "tokens") {
      if (!(ls >> plan.tokenCapacity) || plan.tokenCapacity < 1)
        bad("malformed tokens line");
    } else if (word == "tensor_parallel") {
      if (!(ls >> plan.tensorParallel) || plan.tensorParallel < 2 || !plan.params.empty())
        bad("malformed tensor_parallel line (T >= 2, before the parameters)");
    } else if (word == "sequence_parallel") {
      if (plan.tensorParallel < 2 || plan.sequenceParallel)
        bad("sequence_parallel needs one tensor_parallel line before it");
      plan.sequenceParallel = true;
    } else if (word == "param") {
      param(ls);
    } else if (word == "input") {
      input(ls);
    } else if (word == "scalars") {
      ScalarsInfo sc;
      if (!(ls >> sc.name >> sc.dtype >> sc.size) || sc.dtype != "f64" || sc.size < 1 ||
          sc.size > 4096)
        bad("malformed scalars line (NAME f64 SIZE)");
      plan.scalars.push_back(sc);
    } else if (word == "func") {
      FunctionPlan f;
      if (!(ls >> f.name >> f.arenaBytes) || f.arenaBytes < 0)
        bad("malformed func line");
      plan.functions.push_back(f);
      fn = &plan.functions.back();
    } else if (!fn) {
      bad("'" + word + "' outside a function");
    } else if (word == "buf") {
      buffer(ls);
    } else if (word == "kernel") {
      kernel(ls);
    } else if (word == "gemm") {
      gemm(ls);
    } else if (word == "allreduce_start" || word == "allreduce_wait" ||
               word == "reducescatter_start" || word == "reducescatter_wait" ||
               word == "allgather_start" || word == "allgather_wait") {
      allReduce(word, ls);
    } else if (word == "allreduce_norm") {
      StepDecl s;
      s.kind = StepDecl::AllReduceNorm;
      std::string tok;
      if (!(ls >> tok))
        bad("malformed allreduce_norm line (%ID)");
      s.buffers.push_back(bufferId(tok));
      const BufferDecl &b = fn->buffers[size_t(s.buffers[0])];
      if (bufferElementBytes(b) != 8 || b.bytes != 8)
        bad("allreduce_norm sums one f64 over the ranks");
      fn->steps.push_back(s);
    } else if (word == "tp_allreduce") {
      StepDecl s;
      s.kind = StepDecl::TpAllReduce;
      std::string op, tok;
      if (!(ls >> op >> tok) || (op != "sum" && op != "max"))
        bad("malformed tp_allreduce line (sum|max %ID)");
      if (plan.tensorParallel < 2)
        bad("tp_allreduce in a plan without tensor_parallel");
      requireNoneInFlight(word);
      s.max = op == "max";
      s.buffers.push_back(bufferId(tok));
      const int bytes = bufferElementBytes(fn->buffers[size_t(s.buffers[0])]);
      if (bytes != 4 && bytes != 8)
        bad("tp_allreduce reduces f32 or f64 buffers");
      if (ls >> tok) {
        if (tok != "tag" || !(ls >> s.tag) || s.tag < 0)
          bad("malformed tp_allreduce line (sum|max %ID [tag T])");
        if (s.max)
          bad("tp_allreduce max runs blocking (no tag)");
        if (tpStep(StepDecl::TpAllReduce, s.tag))
          bad("tp_allreduce starts tag " + std::to_string(s.tag) + " twice");
        s.async = true;
      }
      fn->steps.push_back(s);
    } else if (word == "tp_wait") {
      StepDecl s;
      s.kind = StepDecl::TpWait;
      std::string tok;
      if (!(ls >> s.tag >> tok) || s.tag < 0)
        bad("malformed tp_wait line (TAG %ID)");
      s.buffers.push_back(bufferId(tok));
      const StepDecl *start = tpStep(StepDecl::TpAllReduce, s.tag);
      if (!start || tpStep(StepDecl::TpWait, s.tag))
        bad("tp_wait " + std::to_string(s.tag) +
            (start ? " waits twice" : " has no tp_allreduce with that tag before it"));
      if (start->buffers[0] != s.buffers[0])
        bad("tp_wait " + std::to_string(s.tag) + " waits for another buffer than its start's");
      fn->steps.push_back(s);
    } else if (word == "tp_allgather" || word == "tp_reducescatter") {
      tpSlices(word, ls);
    } else if (word == "output") {
      std::string name, id, s;
      if (!(ls >> name >> id >> s))
        bad("malformed output line");
      const int buffer = bufferId(id);
      std::vector<int64_t> dims = shape(s);
      // Read back whole: past its buffer it would read others' memory.
      const BufferDecl &b = fn->buffers[size_t(buffer)];
      const int64_t bytes = numel(dims, plan.tokenCapacity) * bufferElementBytes(b);
      if (bytes > b.bytes)
        bad("output " + name + " " + id + " " + s + " spans " + std::to_string(bytes) +
            " bytes, but buffer " + id + " holds " + std::to_string(b.bytes));
      fn->outputs.push_back({name, buffer, dims});
    } else if (word == "end") {
      end();
    } else {
      bad("unknown directive '" + word + "'");
    }
  }

  void header(const std::string &word, std::istringstream &ls) {
    int v = 0;
    if (word != "mlc-plan" || !(ls >> v) || v != kPlanVersion)
      bad("expected 'mlc-plan " + std::to_string(kPlanVersion) + "'");
  }

  void param(std::istringstream &ls) {
    ParamInfo p;
    std::string s;
    int decay;
    if (!(ls >> p.name >> p.dtype >> s >> decay >> p.init) || (decay != 0 && decay != 1))
      bad("malformed param line");
    if (p.dtype != "f32" && p.dtype != "f64")
      bad("parameter " + p.name + " has dtype " + p.dtype + " (f32 or f64 expected)");
    if (!plan.params.empty() && plan.params[0].dtype != p.dtype)
      bad("parameters mix dtypes " + plan.params[0].dtype + " and " + p.dtype);
    if (!names.insert(p.name).second)
      bad("parameter " + p.name + " is declared twice");
    if (p.init != "zeros" && p.init != "ones" && p.init != "package") {
      char *end = nullptr;
      double std = p.init.rfind("normal:", 0) == 0 ? std::strtod(p.init.c_str() + 7, &end) : -1;
      if (!end || *end || !std::isfinite(std) || std < 0)
        bad("parameter " + p.name + " has init '" + p.init +
            "' (normal:STD, zeros, ones or package)");
    }
    p.shape = shape(s);
    if (std::string tp; ls >> tp) {
      std::string blocks;
      if (tp != "tp" || !(ls >> p.tpDim >> blocks) || plan.tensorParallel < 2 || p.tpDim < 0 ||
          p.tpDim >= int64_t(p.shape.size()))
        bad("parameter " + p.name + ": malformed tp split (tp DIM BLOCKS, in a "
            "tensor_parallel plan)");
      int64_t whole = 0;
      for (size_t at = 0; at <= blocks.size();) {
        size_t comma = std::min(blocks.find(',', at), blocks.size());
        char *end = nullptr;
        std::string b = blocks.substr(at, comma - at);
        long long v = std::strtoll(b.c_str(), &end, 10);
        if (b.empty() || *end || v < 1 || v % plan.tensorParallel)
          bad("parameter " + p.name + ": tp block '" + b + "' is not a positive multiple of " +
              std::to_string(plan.tensorParallel));
        p.tpBlocks.push_back(v);
        whole += v;
        at = comma + 1;
      }
      if (whole / plan.tensorParallel != p.shape[size_t(p.tpDim)])
        bad("parameter " + p.name + ": tp blocks of " + std::to_string(whole) +
            " do not make its dim " + std::to_string(p.tpDim) + " of " +
            std::to_string(p.shape[size_t(p.tpDim)]) + " on each of " +
            std::to_string(plan.tensorParallel) + " ranks");
    }
    p.numel = numel(p.shape, 0);
    p.decay = decay;
    p.offset = paramCount;
    paramCount += p.numel;
    if (paramCount > (int64_t(1) << 60))
      bad("the parameters hold more than 2^60 elements");
    plan.params.push_back(p);
  }

  void input(std::istringstream &ls) {
    InputInfo i;
    std::string s;
    if (!(ls >> i.name >> i.dtype >> s))
      bad("malformed input line");
    elementBytes(i.dtype);
    i.shape = shape(s);
    if (i.dynamic() && plan.tokenCapacity < 1)
      bad("input " + i.name + " has a dynamic dimension but the plan declares no tokens");
    i.numel = numel(i.shape, plan.tokenCapacity);
    // Ids, labels, positions and offsets (a float one is read as garbage).
    for (const char *ints : {"input_ids", "labels", "position_ids", "token_type_ids",
                             "cu_seqlens"})
      if (i.name == ints && i.dtype != "i64" && i.dtype != "i32")
        bad("input " + i.name + " is " + i.dtype + "; it holds integers (i64 or i32)");
    plan.inputs.push_back(i);
  }

  /// `buf %ID KIND ...`: a named flat buffer, an arena slice or a view.
  void buffer(std::istringstream &ls) {
    std::string id, kind;
    ls >> id >> kind;
    BufferDecl b;
    if (auto named = namedKind(kind)) {
      b.kind = *named;
      if (!(ls >> b.name))
        bad("malformed buf line");
      b.bytes = namedBytes(b);
      if (b.bytes < 0)
        bad("buffer " + id + " names no " + kind + " '" + b.name + "' of the plan");
    } else if (kind == "arena") {
      b.kind = BufferDecl::Arena;
      if (!(ls >> b.offset >> b.dtype >> b.numel) || b.offset < 0 || b.numel < 0)
        bad("malformed arena buffer");
      int64_t es = elementBytes(b.dtype);
      if (b.numel > (std::numeric_limits<int64_t>::max() - b.offset) / es ||
          b.offset + b.numel * es > fn->arenaBytes)
        bad("arena buffer " + id + " lies outside the function's arena of " +
            std::to_string(fn->arenaBytes) + " bytes");
      b.bytes = b.numel * es;
    } else if (kind == "alias") {
      b.kind = BufferDecl::Alias;
      std::string target;
      ls >> target;
      b.alias = bufferId(target);
      if (!(ls >> b.offset >> b.dtype >> b.numel) || b.offset < 0 || b.numel < 0)
        bad("malformed alias buffer (alias %ID BYTE_OFFSET DTYPE NUMEL)");
      int64_t es = elementBytes(b.dtype), whole = fn->buffers[b.alias].bytes;
      if (b.numel > (std::numeric_limits<int64_t>::max() - b.offset) / es ||
          b.offset + b.numel * es > whole)
        bad("view " + id + " of bytes [" + std::to_string(b.offset) + ", " +
            std::to_string(b.offset + b.numel * es) + ") lies outside " + target + " (" +
            std::to_string(whole) + " bytes)");
      b.bytes = b.numel * es;
    } else {
      bad("unknown buffer kind '" + kind + "'");
    }
    // Elements are read and written whole: an offset that splits them is no
    // buffer the compiler writes.
    if (!b.dtype.empty() && b.offset % elementBytes(b.dtype))
      bad("buffer " + id + " starts at byte " + std::to_string(b.offset) + ", which is not a "
          "multiple of its element size (" + std::to_string(elementBytes(b.dtype)) + " bytes)");
    if (id != "%" + std::to_string(fn->buffers.size()))
      bad("buffers must be numbered in order");
    fn->buffers.push_back(b);
  }

  static std::optional<BufferDecl::Kind> namedKind(const std::string &kind) {
    static const std::pair<const char *, BufferDecl::Kind> named[] = {
        {"param", BufferDecl::Param},     {"grad", BufferDecl::Grad},
        {"input", BufferDecl::Input},     {"moment1", BufferDecl::Moment1},
        {"moment2", BufferDecl::Moment2}, {"scalars", BufferDecl::Scalars},
        {"grad_sum", BufferDecl::GradSum}};
    for (auto &[word, k] : named)
      if (kind == word)
        return k;
    return std::nullopt;
  }

  /// The bytes of the input, scalars or parameter a named buffer refers to
  /// (every parameter for "*"); -1 if the plan declares none of that name.
  int64_t namedBytes(const BufferDecl &b) {
    if (b.kind == BufferDecl::Input) {
      for (const InputInfo &in : plan.inputs)
        if (in.name == b.name)
          return in.numel * elementBytes(in.dtype);
    } else if (b.kind == BufferDecl::Scalars) {
      for (const ScalarsInfo &sc : plan.scalars)
        if (sc.name == b.name)
          return sc.size * 8;
    } else if (b.name == "*") {
      return paramCount * (plan.params.empty() ? 4 : elementBytes(plan.params[0].dtype));
    } else {
      for (const ParamInfo &p : plan.params)
        if (p.name == b.name)
          return p.numel * elementBytes(p.dtype);
    }
    return -1;
  }

  void kernel(std::istringstream &ls) {
    StepDecl s;
    s.kind = StepDecl::Kernel;
    if (!(ls >> s.kernel))
      bad("malformed kernel line");
    std::string tok;
    while (ls >> tok) {
      if (tok == "shard") {
        if (!(ls >> tok))
          bad("kernel " + s.kernel + ": shard takes a bucket's tag or *");
        if (tok == "*") {
          s.shard = StepDecl::kAllShards;
        } else {
          char *end = nullptr;
          long long v = std::strtoll(tok.c_str(), &end, 10);
          if (*end || v < 0)
            bad("kernel " + s.kernel + ": shard takes a bucket's tag or *, got '" + tok + "'");
          s.shard = v;
        }
        if (ls >> tok)
          bad("kernel " + s.kernel + ": unexpected '" + tok + "' after its shard");
        break;
      }
      s.buffers.push_back(bufferId(tok));
    }
    if (s.buffers.empty())
      bad("kernel " + s.kernel + " takes no buffers");
    fn->steps.push_back(s);
  }

  void gemm(std::istringstream &ls) {
    StepDecl s;
    s.kind = StepDecl::Gemm;
    int nb;
    std::string m, k;
    if (!(ls >> s.transA >> s.transB >> m >> s.n >> k >> nb) || nb < 0 || nb > 8 || s.n < 1)
      bad("malformed gemm line");
    s.m = gemmExtent(m);
    s.k = gemmExtent(k);
    s.batch.resize(nb);
    s.lhsStrides.resize(nb);
    s.rhsStrides.resize(nb);
    for (auto *v : {&s.batch, &s.lhsStrides, &s.rhsStrides})
      for (int64_t &x : *v)
        if (!(ls >> x) || x < 0)
          bad("malformed gemm line");
    std::string tok;
    while (ls >> tok) {
      if (tok == "accumulate" || tok == "bias" || tok == "gelu") {
        bool &flag = tok == "accumulate" ? s.accumulate : tok == "bias" ? s.bias : s.gelu;
        bool later = tok == "accumulate" ? s.bias || s.gelu : tok == "bias" ? s.gelu : false;
        if (!s.buffers.empty() || flag || later)
          bad("gemm flags (accumulate, bias, gelu) come once each, in that order, before the "
              "buffers");
        flag = true;
        continue;
      }
      s.buffers.push_back(bufferId(tok));
    }
    if (s.accumulate && s.gelu)
      bad("an accumulating gemm has no gelu epilogue");
    if (s.buffers.size() != 3 + size_t(s.bias) + size_t(s.gelu))
      bad("gemm needs " + std::to_string(3 + int(s.bias) + int(s.gelu)) +
          " buffers (out, lhs, rhs" + (s.bias ? ", bias" : "") + (s.gelu ? ", pre" : "") +
          "), got " + std::to_string(s.buffers.size()));
    checkGemmExtents(s);
    fn->steps.push_back(s);
  }

  /// A GEMM reads and writes row-major matrices whose leading dimensions
  /// follow from its sizes (lhs M x K, or K x M transposed; rhs K x N, or
  /// N x K; out M x N), batch b's at the batch strides' offsets (out's
  /// packed, b M N): every element it touches must lie in the buffer it
  /// names, at the token capacity where M or K is T. Sizes edited past the
  /// buffers would read and write other buffers' memory.
  void checkGemmExtents(const StepDecl &s) const {
    const int64_t m = s.m < 0 ? plan.tokenCapacity : s.m, k = s.k < 0 ? plan.tokenCapacity : s.k;
    if (m < 1 || k < 1)
      bad("gemm: M or K is T (the token count) but the plan declares no tokens");
    // Elements touched, saturating at 2^62 (no buffer holds that many).
    const int64_t kMax = int64_t(1) << 62;
    auto mul = [&](int64_t a, int64_t b) {
      int64_t r;
      return __builtin_mul_overflow(a, b, &r) || r > kMax ? kMax : r;
    };
    auto add = [&](int64_t a, int64_t b) { return std::min(kMax, a + b); };
    int64_t batches = 1, lhsLast = 0, rhsLast = 0; // the last batch's element offsets
    for (size_t d = 0; d < s.batch.size(); ++d) {
      batches = mul(batches, s.batch[d]);
      if (s.batch[d] > 0) {
        lhsLast = add(lhsLast, mul(s.batch[d] - 1, s.lhsStrides[d]));
        rhsLast = add(rhsLast, mul(s.batch[d] - 1, s.rhsStrides[d]));
      }
    }
    if (batches == 0)
      return; // no product: nothing is touched
    struct Operand {
      const char *what;
      int buffer;
      int64_t elements;
    };
    std::vector<Operand> operands = {{"result", s.buffers[0], mul(batches, mul(m, s.n))},
                                     {"lhs", s.buffers[1], add(lhsLast, mul(m, k))},
                                     {"rhs", s.buffers[2], add(rhsLast, mul(k, s.n))}};
    if (s.bias)
      operands.push_back({"bias", s.buffers[3], s.n});
    if (s.gelu)
      operands.push_back({"pre-activation", s.buffers.back(), operands[0].elements});
    for (const Operand &o : operands) {
      const BufferDecl &b = fn->buffers[size_t(o.buffer)];
      const int64_t es = bufferElementBytes(b), held = b.bytes / es;
      if (o.elements > held)
        bad("gemm " + std::string(s.transA ? "T" : "N") + (s.transB ? "T" : "N") + " M " +
            std::to_string(m) + " N " + std::to_string(s.n) + " K " + std::to_string(k) +
            (s.batch.empty() ? std::string() : " x " + std::to_string(batches) + " batches") +
            ": its " + o.what + " spans " + (o.elements >= kMax ? std::string("over 2^62")
                                                               : std::to_string(o.elements)) +
            " elements, but buffer %" + std::to_string(o.buffer) + " holds " +
            std::to_string(held));
    }
  }

  /// Bytes per element of a buffer: a view's or arena slice's own dtype, an
  /// input's, the scalars' f64, else the parameters' dtype.
  int64_t bufferElementBytes(const BufferDecl &b) const {
    if (b.kind == BufferDecl::Arena || b.kind == BufferDecl::Alias)
      return elementBytes(b.dtype);
    if (b.kind == BufferDecl::Scalars)
      return 8;
    if (b.kind == BufferDecl::Input)
      for (const InputInfo &in : plan.inputs)
        if (in.name == b.name)
          return elementBytes(in.dtype);
    return plan.params.empty() ? 4 : elementBytes(plan.params[0].dtype);
  }

  /// A GEMM's m or k: a positive extent, or T (the batch's token count).
  int64_t gemmExtent(const std::string &t) const {
    if (t == "T")
      return -1;
    char *end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (*end || v < 1)
      bad("malformed gemm extent '" + t + "'");
    return v;
  }

  /// allreduce_*, reducescatter_*, allgather_*: STARTS TAG OFFSET COUNT
  /// %BUF [clip] and WAITS TAG, each tag started and waited for once per kind.
  void allReduce(const std::string &word, std::istringstream &ls) {
    const std::string family = word.substr(0, word.find('_'));
    const bool wait = word.size() > 5 && word.compare(word.size() - 5, 5, "_wait") == 0;
    StepDecl::Kind startKind = family == "allreduce"       ? StepDecl::AllReduceStart
                               : family == "reducescatter" ? StepDecl::ReduceScatterStart
                                                           : StepDecl::AllGatherStart;
    StepDecl::Kind waitKind = StepDecl::Kind(int(startKind) + 1);
    const std::string startWord = family + "_start";
    StepDecl s;
    s.kind = wait ? waitKind : startKind;
    if (!(ls >> s.tag) || s.tag < 0)
      bad("malformed " + word + " line (a tag >= 0 first)");
    bool started = false, waited = false;
    for (const StepDecl &e : fn->steps)
      if (e.tag == s.tag) {
        started |= e.kind == startKind;
        waited |= e.kind == waitKind;
      }
    if (wait) {
      if (!started || waited)
        bad(word + " " + std::to_string(s.tag) +
            (waited ? " waits twice" : " has no " + startWord + " before it"));
      fn->steps.push_back(s);
      return;
    }
    std::string tok;
    if (!(ls >> s.offset >> s.count >> tok) || s.offset < 0 || s.count < 1)
      bad("malformed " + word + " line (TAG OFFSET COUNT %BUFFER)");
    if (started)
      bad(word + " " + std::to_string(s.tag) + " starts a tag twice");
    s.buffers.push_back(bufferId(tok));
    if (ls >> tok) {
      if (tok != "clip" || startKind == StepDecl::AllGatherStart)
        bad(word + ": unexpected '" + tok + "'" +
            (startKind == StepDecl::AllGatherStart ? "" : " (only 'clip' may follow)"));
      s.clip = true;
    }
    const BufferDecl &g = fn->buffers[s.buffers[0]];
    const bool params = startKind == StepDecl::AllGatherStart;
    if (g.kind != (params ? BufferDecl::Param : BufferDecl::Grad) || g.name != "*")
      bad(word + (params ? " gathers the whole parameter buffer (param *)"
                         : " reduces the whole gradient buffer (grad *)"));
    if (s.offset > paramCount - s.count)
      bad(word + " slice [" + std::to_string(s.offset) + ", +" + std::to_string(s.count) +
          ") lies outside the " + std::to_string(paramCount) +
          (params ? " parameters" : " gradients"));
    fn->steps.push_back(s);
  }

  /// This function's asynchronous tp_allreduce (or tp_wait) of `tag`.
  const StepDecl *tpStep(StepDecl::Kind kind, int64_t tag) const {
    for (const StepDecl &e : fn->steps)
      if (e.kind == kind && e.tag == tag && (kind == StepDecl::TpWait || e.async))
        return &e;
    return nullptr;
  }

  /// The group's collectives run one at a time, in one order (on CUDA an
  /// asynchronous one has a stream of its own): none starts while a
  /// tp_allreduce with a tag is in flight (refused at the function's end,
  /// after a start that is never waited for).
  void requireNoneInFlight(const std::string &word) {
    for (const StepDecl &e : fn->steps)
      if (e.kind == StepDecl::TpAllReduce && e.async && !tpStep(StepDecl::TpWait, e.tag) &&
          inFlight.empty())
        inFlight = path + ":" + std::to_string(lineNo) + ": " + word + " while tp_allreduce tag " +
                   std::to_string(e.tag) + " is in flight (before its tp_wait)";
  }

  void end() {
    for (const StepDecl &a : fn->steps)
      if (a.kind == StepDecl::TpAllReduce && a.async && !tpStep(StepDecl::TpWait, a.tag))
        bad("tp_allreduce tag " + std::to_string(a.tag) + " is never waited for");
    if (!inFlight.empty())
      fail(inFlight);
    for (const StepDecl &a : fn->steps)
      if ((a.kind == StepDecl::AllReduceStart || a.kind == StepDecl::ReduceScatterStart ||
           a.kind == StepDecl::AllGatherStart) &&
          std::none_of(fn->steps.begin(), fn->steps.end(), [&](const StepDecl &w) {
            return w.kind == StepDecl::Kind(int(a.kind) + 1) && w.tag == a.tag;
          }))
        bad(std::string(collectiveName(a.kind)) + " " + std::to_string(a.tag) +
            " is never waited for");
    fn = nullptr;
  }

  int bufferId(const std::string &tok) const {
    if (tok.size() < 2 || tok[0] != '%')
      bad("expected a buffer id, got '" + tok + "'");
    char *end = nullptr;
    long id = std::strtol(tok.c_str() + 1, &end, 10);
    if (*end || !fn || id < 0 || id >= long(fn->buffers.size()))
      bad("unknown buffer " + tok);
    return int(id);
  }

  std::vector<int64_t> shape(const std::string &t) const {
    try {
      return parseShape(t);
    } catch (const Error &e) {
      bad(e.what());
    }
  }

  int64_t numel(const std::vector<int64_t> &s, int64_t capacity) const {
    bool overflow = false;
    int64_t n = product(s, capacity, overflow);
    // Element counts stay below 2^60 so that bytes (8 per element at most)
    // and sums of sizes cannot overflow.
    if (overflow || n > (int64_t(1) << 60))
      bad("shape " + shapeText(s) + " is too large");
    return n;
  }

  int64_t elementBytes(const std::string &dtype) const {
    if (dtype == "i1")
      return 1; // masks: one byte per element
    try {
      return dtypeSize(dtype);
    } catch (const Error &) {
      bad("unknown dtype '" + dtype + "'");
    }
  }

  std::string path;
  PlanData plan;
  int lineNo = 0;
  FunctionPlan *fn = nullptr;
  std::string inFlight; // the first collective started while one was in flight
  int64_t paramCount = 0;
  std::set<std::string> names;
};

} // namespace

PlanData parsePlan(const std::string &text, const std::string &path) {
  return PlanParser(path).parse(text);
}

} // namespace mlc::rt
