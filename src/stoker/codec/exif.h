// EXIF orientation: reading the tag from a JPEG header and applying it to pixels the way
// PIL.ImageOps.exif_transpose does. Decoders never rotate on their own; callers that
// want the transposed image (Hugging Face's load_image does) ask for it.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>

namespace stoker::codec {

// The EXIF Orientation tag (0x0112) of IFD0, 1..8. Returns 1 (as stored, "top-left")
// when the data is not a JPEG, has no EXIF APP1 segment, or the tag is missing, out of
// range or unreadable, which is what exif_transpose treats as "leave alone". Reads
// only the header segments.
int ReadExifOrientation(std::span<const uint8_t> data);

// True for orientations 5..8, whose transpose swaps width and height.
inline bool OrientationSwapsAxes(int orientation) {
  return orientation >= 5 && orientation <= 8;
}

// Writes the transposed image to `dst` (same number of bytes as `src`; its width and
// height are swapped when OrientationSwapsAxes). Orientation -> PIL transpose:
// 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270,
// 7 TRANSVERSE, 8 ROTATE_90; anything else copies.
void ApplyExifOrientation(const uint8_t* src, int width, int height, int channels,
                          int orientation, uint8_t* dst);

}  // namespace stoker::codec
