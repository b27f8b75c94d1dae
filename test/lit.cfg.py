# -*- Python -*-
# lit configuration of mlc's regression tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MLC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mlc_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# Compiled kernels are cached inside the build tree, not in the home directory.
config.environment["MLC_CACHE_DIR"] = os.path.join(config.mlc_obj_root, "mlc-cache")
config.substitutions.append(("%PATH%", config.environment["PATH"]))
# Multi-rank tests run mpirun; CI runs as root, which Open MPI refuses unless told.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.substitutions.append(("%mpirun", "mpirun --oversubscribe -np"))
config.substitutions.append(("%mlc_src", config.mlc_src_root))
config.substitutions.append(("%mlc_build", config.mlc_obj_root))
# Python with PyTorch and ONNX (Debian's) and HuggingFace tokenizers, for
# reference computations (make test prepares it; see the Makefile).
config.substitutions.append(("%python", config.mlc_test_python or "/usr/bin/python3"))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.mlc_tools_dir, config.llvm_tools_dir]
tools = ["mlc-opt", "mlc", "mlc-runtime", "not", "count", "split-file"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# Whether this machine has an NVIDIA driver: the tests of what happens
# without one do not run where there is one.
try:
    import ctypes

    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
