// mlc's CUDA emulation header: kernels.cu compiled by the host compiler.
// Embedded at build time (Embed.cmake) as cudaEmulationHeader(), which the
// emulator pastes ahead of kernels.cu; CudaEmulation.h says how it works.
#define MLC_CUDA_EMULATION 1
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct dim3 {
  unsigned x, y, z;
};

namespace mlc_emu {

struct Thread {
  dim3 tid, bid, bdim, gdim;
};
enum { Ready, AtBlockBarrier, AtWarpBarrier, Done };
// Calls kernel `fn` with the launch's parameters (cuLaunchKernel's array of
// pointers to each argument): the runtime supplies one per signature.
typedef void (*Thunk)(void *fn, void *const *params);

// A context switch saves the callee-saved registers and the floating-point
// control words on the old stack and resumes the new one: on x86-64 a few
// instructions (switch(&from, to) below); elsewhere ucontext, whose
// swapcontext also makes a system call.
#if defined(__x86_64__)
extern "C" void mlc_emu_switch(void **from, void *to);
asm(".text\n.p2align 4\n.hidden mlc_emu_switch\n.globl mlc_emu_switch\n"
    ".type mlc_emu_switch,@function\n"
    "mlc_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n.size mlc_emu_switch, .-mlc_emu_switch\n");
struct Context {
  void *sp = nullptr;
};
#else
struct Context {
  ucontext_t uc;
};
#endif

struct Fiber {
  Context ctx;
  Thread id;
  int state;
};

// One OS thread's block: its fibers, their stacks and the warp exchange.
struct Block {
  Thunk thunk;
  void *fn;
  void *const *params;
  int current;
  std::vector<Fiber> fibers;
  std::vector<char> stacks;
  Context scheduler;
  unsigned char lanes[1024][16];
};

static const size_t kStack = 128 * 1024;
static thread_local Block *block;
static thread_local Thread *self;

static inline void transfer(Context &from, Context &to) {
#if defined(__x86_64__)
  mlc_emu_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}

static inline void wait(int why) {
  Fiber &f = block->fibers[block->current];
  f.state = why;
  transfer(f.ctx, block->scheduler);
}

// A fiber's first and last frame: runs the kernel as its thread, then
// returns to the scheduler for good.
static void entry() {
  Block *b = block;
  b->thunk(b->fn, b->params);
  Fiber &f = b->fibers[b->current];
  f.state = Done;
  transfer(f.ctx, b->scheduler);
  std::abort(); // never resumed
}

static void start(Fiber &f, char *stack) {
#if defined(__x86_64__)
  // The stack as mlc_emu_switch leaves it: control words, six registers,
  // then entry() as the return address, aligned as if entry were called.
  uint64_t *top = reinterpret_cast<uint64_t *>(
      (reinterpret_cast<uintptr_t>(stack + kStack) & ~uintptr_t(15)));
  top[-1] = 0;
  top[-2] = reinterpret_cast<uint64_t>(&entry);
  for (int r = 3; r <= 8; ++r)
    top[-r] = 0;
  uint32_t control[2] = {0x1F80u, 0x037Fu}; // MXCSR and x87 control word defaults
  std::memcpy(&top[-9], control, sizeof control);
  f.ctx.sp = &top[-9];
#else
  getcontext(&f.ctx.uc);
  f.ctx.uc.uc_stack.ss_sp = stack;
  f.ctx.uc.uc_stack.ss_size = kStack;
  f.ctx.uc.uc_link = nullptr;
  makecontext(&f.ctx.uc, entry, 0);
#endif
}

static void runBlock(Block &b, unsigned id, unsigned grid, unsigned threads) {
  b.fibers.resize(threads);
  if (b.stacks.size() < threads * kStack)
    b.stacks.resize(threads * kStack);
  for (unsigned t = 0; t < threads; ++t) {
    Fiber &f = b.fibers[t];
    f.id = Thread{{t, 0, 0}, {id, 0, 0}, {threads, 1, 1}, {grid, 1, 1}};
    f.state = Ready;
    start(f, b.stacks.data() + t * kStack);
  }
  for (;;) {
    bool ran = false;
    for (unsigned t = 0; t < threads; ++t)
      if (b.fibers[t].state == Ready) {
        b.current = int(t);
        self = &b.fibers[t].id;
        transfer(b.scheduler, b.fibers[t].ctx);
        ran = true;
      }
    // Release a barrier once every live thread of its group waits at it.
    unsigned live = 0, atBlock = 0;
    for (unsigned t = 0; t < threads; ++t) {
      live += b.fibers[t].state != Done;
      atBlock += b.fibers[t].state == AtBlockBarrier;
    }
    if (live == 0)
      return;
    bool released = false;
    if (atBlock == live) {
      for (unsigned t = 0; t < threads; ++t)
        b.fibers[t].state = Ready;
      released = true;
    } else {
      for (unsigned w = 0; w < threads; w += 32) {
        unsigned wl = 0, wa = 0;
        for (unsigned t = w; t < w + 32 && t < threads; ++t) {
          wl += b.fibers[t].state != Done;
          wa += b.fibers[t].state == AtWarpBarrier;
        }
        if (wl && wa == wl) {
          for (unsigned t = w; t < w + 32 && t < threads; ++t)
            if (b.fibers[t].state == AtWarpBarrier)
              b.fibers[t].state = Ready;
          released = true;
        }
      }
    }
    if (!ran && !released) {
      std::fprintf(stderr, "mlc CUDA emulator: block %u deadlocks (threads wait at different "
                           "barriers: a __syncthreads or shuffle in divergent code)\n", id);
      std::abort();
    }
  }
}

} // namespace mlc_emu

#define threadIdx (mlc_emu::self->tid)
#define blockIdx (mlc_emu::self->bid)
#define blockDim (mlc_emu::self->bdim)
#define gridDim (mlc_emu::self->gdim)

static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
static inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

static inline void __syncthreads() { mlc_emu::wait(mlc_emu::AtBlockBarrier); }

template <typename T> static inline T mlc_emu_shuffle(T v, int src) {
  static_assert(sizeof(T) <= 16, "shuffle of a value wider than 16 bytes");
  mlc_emu::Block *b = mlc_emu::block;
  const int t = b->current;
  std::memcpy(b->lanes[t], &v, sizeof v);
  mlc_emu::wait(mlc_emu::AtWarpBarrier);
  T out;
  std::memcpy(&out, b->lanes[(t & ~31) | (src & 31)], sizeof out);
  mlc_emu::wait(mlc_emu::AtWarpBarrier);
  return out;
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int mask) {
  return mlc_emu_shuffle(v, (mlc_emu::block->current & 31) ^ mask);
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int lane) {
  return mlc_emu_shuffle(v, lane);
}

static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long expected,
                                           unsigned long long desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
  unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < old &&
         !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

// One launch of kernel `fn`: every block, shared out among OpenMP threads.
extern "C" void mlc_emu_launch(mlc_emu::Thunk thunk, void *fn, void *const *params, int64_t grid,
                               int64_t threads) {
#pragma omp parallel
  {
    static thread_local mlc_emu::Block *mine = nullptr;
    if (!mine)
      mine = new mlc_emu::Block();
#pragma omp for schedule(dynamic, 1)
    for (int64_t g = 0; g < grid; ++g) {
      mlc_emu::block = mine;
      mine->thunk = thunk;
      mine->fn = fn;
      mine->params = params;
      mlc_emu::runBlock(*mine, unsigned(g), unsigned(grid), unsigned(threads));
    }
  }
}

#line 1 "kernels.cu"
