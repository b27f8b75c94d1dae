# mlc: the two commands a fresh machine needs are `make demo` and `make test`.
# `make` alone builds. Every system dependency is installed by `make setup`.

BUILD ?= build
JOBS ?= $(shell nproc)
LLVM_DIR := /usr/lib/llvm-19
PY := /usr/bin/python3
# Python for the tests: Debian's (PyTorch, ONNX) plus HuggingFace tokenizers
# from PyPI, in a virtual environment that sees the system packages.
VENV := $(abspath $(BUILD))/venv
TEST_PY := $(VENV)/bin/python
# Bumped when the venv's package list changes, so that an old venv is rebuilt.
VENV_READY := $(VENV)/.ready-4

APT_PACKAGES := \
  cmake ninja-build ccache g++ clang libclang-rt-14-dev \
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools \
  libgtest-dev libopenblas-dev libicu-dev zlib1g-dev python3-venv \
  libonnx-dev libprotobuf-dev protobuf-compiler openmpi-bin libopenmpi-dev libdnnl-dev \
  python3 python3-numpy python3-torch python3-onnx

.PHONY: all build setup test demo clean

all: build

# Installs only what is missing, so that a machine set up once returns at once.
setup:
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "mlc setup: installing$$(echo $$missing | tr '\n' ' ')"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; \
	else echo "mlc setup: all dependencies present"; fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/build/utils/lit/lit.py \
	  -DPython3_EXECUTABLE=$(PY) \
	  -DMLC_TEST_PYTHON=$(TEST_PY)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# HuggingFace transformers (the ONNX fixtures' models; it brings tokenizers),
# onnxruntime, an independent reference for imported models, TensorBoard,
# whose reader checks --tensorboard-dir's event files, and sentencepiece, the
# reference for SentencePieceTokenizer.
$(VENV_READY):
	$(PY) -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check \
	  transformers==4.38.2 onnxruntime==1.32.0 tensorboard==2.21.0 sentencepiece==0.2.1
	touch $@

test: setup
	$(MAKE) build
	$(MAKE) $(VENV_READY)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: setup
	$(MAKE) build
	./scripts/demo.sh $(BUILD)
	$(MAKE) $(VENV_READY)
	@echo "== part 2: a tiny Llama with a tokenizer.json, saved as a Hugging Face model directory and sampled by transformers (examples/hf-llama)"
	OUT=$(BUILD)/demo/hf-llama ./examples/hf-llama/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)
