//===- Plot.h - training curves as a PNG -----------------------*- C++ -*-===//
//
// `mlc plot LOG.jsonl -o loss.png`: the training loss (blue) and validation
// loss (orange) against the step in the upper panel, with their legend,
// tokens/s (green) in the lower one; a title, the axes' labels and their
// ranges written at their ends. Drawn and encoded here (lines, the bitmap
// font of PlotFont.h, the PNG chunks with their CRC-32), the image
// data compressed with zlib where the build has it (else stored, uncompressed
// deflate blocks): a few hundred lines that build on any machine the runtime
// does, where a plotting library would be the runtime's largest dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_PLOT_H
#define MLC_RUNTIME_TRAIN_PLOT_H

#include <string>

namespace mlc::rt {

/// Reads a `--log-json` file and writes the plot; returns a one-line summary.
/// An Error names the log (and its line) when it is not such a file or a
/// value is not a number, or `pngPath` when it is the log itself. An
/// unfinished last line, as a running training leaves it, is left out.
std::string plotLog(const std::string &logPath, const std::string &pngPath, int width = 960,
                    int height = 600);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_PLOT_H
