//===- Package.cpp - reading a compiled package ----------------------------===//

#include "runtime/core/Package.h"
#include "runtime/core/Error.h"
#include "runtime/core/Hash.h"
#include "runtime/core/TensorIO.h"

#include <sstream>
#include <sys/stat.h>

namespace mlc::rt {

std::vector<int64_t> parseShape(const std::string &text) {
  std::vector<int64_t> shape;
  if (text == "scalar")
    return shape;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, 'x'))
    shape.push_back(item == "?" ? -1 : std::stoll(item));
  return shape;
}

static int64_t product(const std::vector<int64_t> &s, int64_t capacity = 0) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d < 0 ? capacity : d;
  return n;
}

Package Package::load(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + ": not a package directory");
  Package pkg;
  pkg.dir = dir;
  std::string manifestPath = dir + "/manifest.json";
  pkg.manifest = Json::parse(readFile(manifestPath), manifestPath);
  const Json *format = pkg.manifest.find("format");
  const Json *version = pkg.manifest.find("version");
  if (!format || format->string != "mlc-package" || !version)
    fail(manifestPath + ": not an mlc package manifest");
  if (int(version->number) != kPackageVersion)
    fail(manifestPath + ": package format version " + std::to_string(int(version->number)) +
         " is not supported by this runtime (it reads version " +
         std::to_string(kPackageVersion) + "); recompile with a matching mlc");
  // Every listed file must still have the content it was compiled with.
  std::map<std::string, std::string> contents;
  if (const Json *files = pkg.manifest.find("files"))
    for (auto &[name, hash] : files->object) {
      std::string bytes = readFile(dir + "/" + name);
      if (contentHash(bytes) != hash.string)
        fail(dir + "/" + name + ": content hash " + contentHash(bytes) +
             " does not match the manifest's " + hash.string +
             " (the file changed or is corrupt)");
      contents[name] = std::move(bytes);
    }
  if (!contents.count("plan.txt") || !contents.count("kernels.cpp"))
    fail(manifestPath + ": lists no plan.txt or kernels.cpp");
  pkg.kernelsSource = contents["kernels.cpp"];

  std::istringstream in(contents["plan.txt"]);
  std::string line;
  int lineNo = 0;
  FunctionPlan *fn = nullptr;
  auto bad = [&](const std::string &msg) {
    fail(dir + "/plan.txt:" + std::to_string(lineNo) + ": " + msg);
  };
  auto bufferId = [&](const std::string &tok) {
    if (tok.size() < 2 || tok[0] != '%')
      bad("expected a buffer id, got '" + tok + "'");
    int id = std::stoi(tok.substr(1));
    if (!fn || id < 0 || id >= int(fn->buffers.size()))
      bad("unknown buffer " + tok);
    return id;
  };
  while (std::getline(in, line)) {
    ++lineNo;
    std::istringstream ls(line);
    std::string word;
    if (!(ls >> word))
      continue;
    if (lineNo == 1) {
      int v = 0;
      if (word != "mlc-plan" || !(ls >> v) || v != kPackageVersion)
        bad("expected 'mlc-plan " + std::to_string(kPackageVersion) + "'");
    } else if (word == "tokens") {
      if (!(ls >> pkg.tokenCapacity) || pkg.tokenCapacity < 1)
        bad("malformed tokens line");
    } else if (word == "param") {
      ParamInfo p;
      std::string shape;
      int decay;
      if (!(ls >> p.name >> p.dtype >> shape >> decay >> p.init))
        bad("malformed param line");
      p.shape = parseShape(shape);
      p.numel = product(p.shape);
      p.decay = decay;
      p.offset = pkg.paramCount;
      pkg.paramCount += p.numel;
      pkg.dtype = p.dtype;
      pkg.params.push_back(p);
    } else if (word == "input") {
      InputInfo i;
      std::string shape;
      if (!(ls >> i.name >> i.dtype >> shape))
        bad("malformed input line");
      i.shape = parseShape(shape);
      if (i.dynamic() && pkg.tokenCapacity < 1)
        bad("input " + i.name + " has a dynamic dimension but the plan declares no tokens");
      i.numel = product(i.shape, pkg.tokenCapacity);
      pkg.inputs.push_back(i);
    } else if (word == "func") {
      FunctionPlan f;
      if (!(ls >> f.name >> f.arenaBytes))
        bad("malformed func line");
      fn = &(pkg.functions[f.name] = f);
    } else if (!fn) {
      bad("'" + word + "' outside a function");
    } else if (word == "buf") {
      std::string id, kind;
      ls >> id >> kind;
      BufferDecl b;
      if (kind == "param" || kind == "grad" || kind == "input") {
        b.kind = kind == "param"  ? BufferDecl::Param
                 : kind == "grad" ? BufferDecl::Grad
                                  : BufferDecl::Input;
        ls >> b.name;
      } else if (kind == "arena") {
        b.kind = BufferDecl::Arena;
        ls >> b.offset >> b.dtype >> b.numel;
      } else if (kind == "alias") {
        b.kind = BufferDecl::Alias;
        std::string target;
        ls >> target;
        b.alias = bufferId(target);
        if (!(ls >> b.offset)) // optional byte offset into the target
          b.offset = 0;
      } else {
        bad("unknown buffer kind '" + kind + "'");
      }
      if (id != "%" + std::to_string(fn->buffers.size()))
        bad("buffers must be numbered in order");
      fn->buffers.push_back(b);
    } else if (word == "kernel") {
      StepDecl s;
      s.kind = StepDecl::Kernel;
      ls >> s.kernel;
      std::string tok;
      while (ls >> tok)
        s.buffers.push_back(bufferId(tok));
      fn->steps.push_back(s);
    } else if (word == "gemm") {
      StepDecl s;
      s.kind = StepDecl::Gemm;
      int nb;
      std::string m, k;
      if (!(ls >> s.transA >> s.transB >> m >> s.n >> k >> nb))
        bad("malformed gemm line");
      s.m = m == "T" ? -1 : std::stoll(m); // -1: the batch's token count
      s.k = k == "T" ? -1 : std::stoll(k);
      s.batch.resize(nb);
      s.lhsStrides.resize(nb);
      s.rhsStrides.resize(nb);
      for (auto *v : {&s.batch, &s.lhsStrides, &s.rhsStrides})
        for (int64_t &x : *v)
          ls >> x;
      std::string tok;
      while (ls >> tok)
        s.buffers.push_back(bufferId(tok));
      if (s.buffers.size() != 3)
        bad("gemm needs 3 buffers");
      fn->steps.push_back(s);
    } else if (word == "output") {
      std::string name, id, shape;
      if (!(ls >> name >> id >> shape))
        bad("malformed output line");
      fn->outputs.push_back({name, bufferId(id), parseShape(shape)});
    } else if (word == "end") {
      fn = nullptr;
    } else {
      bad("unknown directive '" + word + "'");
    }
  }
  if (!pkg.functions.count("forward"))
    fail(dir + "/plan.txt: has no forward function");
  return pkg;
}

const FunctionPlan &Package::function(const std::string &name) const {
  auto it = functions.find(name);
  if (it == functions.end())
    fail(dir + ": the package has no '" + name + "' function" +
         (name == "train_step" ? " (it was compiled for inference only)" : ""));
  return it->second;
}

const ParamInfo *Package::param(const std::string &name) const {
  for (const ParamInfo &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace mlc::rt
