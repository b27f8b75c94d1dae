#!/usr/bin/env python3
"""Checks mlc's layer order: which folder's sources may include, and whose
CMake targets may link, which other folder's.

    check_layers.py TABLE SRC_ROOT

TABLE is a file whose lines `# LAYER folder: allowed...` state the order
(test/tools/layers.test) and whose `# TOOLS: folder...` line names the
folders that may read any layer. A file belongs to the most specific layer
folder that holds it (compiler/codegen/X.cpp to compiler/codegen, not to
compiler); an allowed folder admits the layers beneath it too (`runtime`
admits runtime/core). `mlir` stands for MLIR and LLVM: includes under
mlir/, llvm/ or llvm-c/, and ${MLC_MLIR_LIBS}, MLIR* and LLVM* libraries.

Includes are those rooted at the repository (`#include "passes/Passes.h"`);
a CMake target belongs to the layer of the CMakeLists.txt that defines it,
and target_link_libraries and add_dependencies are checked against the layer
of the CMakeLists.txt that calls them. Every top-level folder that holds C++
must be a layer or a tool, so that a new folder is placed in the order
before it builds. Prints each violation as `path:line: ...` and exits 1.
"""

import os
import re
import sys

CXX = (".cpp", ".h", ".cuh", ".cc", ".hpp", ".inc", ".td")
MLIR = "mlir"


def read_table(path):
    layers, tools = {}, set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#\s*LAYER\s+([\w/.-]+)\s*:(.*)$", line)
        if m:
            layers[m.group(1).strip("/")] = m.group(2).split()
            continue
        m = re.match(r"#\s*TOOLS\s*:(.*)$", line)
        if m:
            tools.update(m.group(1).split())
    if not layers:
        sys.exit(f"{path}: no '# LAYER folder: allowed...' lines")
    for layer, allowed in layers.items():
        for a in allowed:
            if a != MLIR and a not in layers and not any(l.startswith(a + "/") for l in layers):
                sys.exit(f"{path}: layer {layer} allows '{a}', which is no layer")
    return layers, tools


def layer_of(path, layers):
    """The most specific layer folder holding `path` (relative, '/'-separated)."""
    best = None
    for layer in layers:
        if path == layer or path.startswith(layer + "/"):
            if best is None or len(layer) > len(best):
                best = layer
    return best


def allows(layers, layer, target):
    if target == layer:
        return True
    for a in layers[layer]:
        if target == a or target.startswith(a + "/"):
            return True
    return False


def is_build_tree(path):
    return os.path.exists(os.path.join(path, "CMakeCache.txt"))


def source_files(root, top):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not is_build_tree(os.path.join(dirpath, d)))
        for f in sorted(filenames):
            yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


def main():
    table, root = sys.argv[1], sys.argv[2]
    layers, tools = read_table(table)
    tops = {l.split("/")[0] for l in layers}
    errors = []
    counts = {"files": 0, "includes": 0, "links": 0}

    # Every top-level folder with C++ sources is a layer or a tool.
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if (entry.startswith(".") or not os.path.isdir(path) or is_build_tree(path)
                or entry in tops or entry in tools):
            continue
        if any(f.endswith(CXX) for f in source_files(root, entry)):
            errors.append(f"{entry}/: holds C++ sources but is neither a layer nor a tool "
                          f"folder of {os.path.basename(table)}: add it to the order")

    def name(layer):
        return layer if layer == MLIR else layer + "/"

    def allowed_text(layer):
        return ", ".join(name(a) for a in layers[layer]) or "nothing of mlc"

    # Includes.
    include = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
    for top in sorted(tops):
        for rel in source_files(root, top):
            if not rel.endswith(CXX):
                continue
            layer = layer_of(rel, layers)
            if layer is None:
                errors.append(f"{rel}: in no layer of {os.path.basename(table)}")
                continue
            counts["files"] += 1
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = include.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    first = inc.split("/")[0]
                    if first in ("mlir", "llvm", "llvm-c"):
                        target = MLIR
                    elif first in tops and "/" in inc:
                        target = layer_of(inc, layers)
                        if target is None:
                            errors.append(f"{rel}:{lineno}: includes {inc}, in no layer")
                            continue
                    else:
                        continue
                    counts["includes"] += 1
                    if not allows(layers, layer, target):
                        errors.append(f"{rel}:{lineno}: {name(layer)} includes {inc} "
                                      f"({name(target)}); {name(layer)} may read "
                                      f"{allowed_text(layer)}")

    # CMake: which layer defines each target, then what each layer links.
    define = re.compile(r"\b(add_library|add_executable|add_public_tablegen_target|"
                        r"add_custom_target|add_mlir_dialect_library|add_llvm_executable)"
                        r"\s*\(\s*([\w.+-]+)")
    use = re.compile(r"\b(target_link_libraries|add_dependencies)\s*\(([^)]*)\)", re.S)
    cmakes = []
    for top in sorted(tops):
        for rel in source_files(root, top):
            if os.path.basename(rel) == "CMakeLists.txt":
                text = open(os.path.join(root, rel), encoding="utf-8").read()
                text = re.sub(r"#[^\n]*", "", text)
                cmakes.append((rel, layer_of(os.path.dirname(rel), layers), text))
    owner = {}
    for rel, layer, text in cmakes:
        for m in define.finditer(text):
            owner[m.group(2)] = layer
    keywords = {"PUBLIC", "PRIVATE", "INTERFACE"}
    for rel, layer, text in cmakes:
        if layer is None:
            errors.append(f"{rel}: in no layer of {os.path.basename(table)}")
            continue
        for m in use.finditer(text):
            words = m.group(2).split()
            lineno = text.count("\n", 0, m.start()) + 1
            for lib in words[1:]:
                if lib in keywords:
                    continue
                if lib == "${MLC_MLIR_LIBS}" or re.match(r"(MLIR|LLVM)\w*$", lib):
                    target = MLIR
                elif lib in owner:
                    target = owner[lib]
                else:
                    continue  # a system library (OpenMP, BLAS, protobuf, ...)
                counts["links"] += 1
                if not allows(layers, layer, target):
                    errors.append(f"{rel}:{lineno}: {name(layer)} links {lib} "
                                  f"({name(target)}); {name(layer)} may use "
                                  f"{allowed_text(layer)}")

    for e in errors:
        print("layers: " + e)
    if errors:
        print(f"layers: {len(errors)} violations of the layer order")
        return 1
    print(f"layers: the order holds: {len(layers)} layers, {counts['files']} files, "
          f"{counts['includes']} includes, {counts['links']} CMake links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
