# Embeds a kernel prelude as a C++ string constant, at build time:
#   cmake -DIN=prelude/cpu.h -DSHARED=prelude/mlc_shared.h -DNAME=kCpuPrelude
#         -DOUT=CpuPrelude.inc -P Embed.cmake
# The prelude's `#include "mlc_shared.h"` line takes the shared helpers' text,
# so the generated kernels.cpp / kernels.cu include no header of mlc's.
file(READ "${SHARED}" shared)
file(READ "${IN}" text)
string(REPLACE "#include \"mlc_shared.h\"" "${shared}" text "${text}")
string(FIND "${text}" ")MLCPRELUDE\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw-string delimiter )MLCPRELUDE\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by Embed.cmake; edit the prelude, not this file.\n"
  "inline constexpr const char ${NAME}[] = R\"MLCPRELUDE(${text})MLCPRELUDE\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
