# Embeds a source file as a C++ string constant, at build time:
#   cmake -DIN=emulation.h -DNAME=kCudaEmulationHeader -DOUT=CudaEmulationHeader.inc
#         -P Embed.cmake
# (The runtime's own copy of compiler/codegen/prelude/Embed.cmake, less its
# shared-helpers splice: the runtime builds without the compiler's tree.)
file(READ "${IN}" text)
string(FIND "${text}" ")MLCEMBED\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw-string delimiter )MLCEMBED\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by Embed.cmake; edit the source, not this file.\n"
  "inline constexpr const char ${NAME}[] = R\"MLCEMBED(${text})MLCEMBED\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
