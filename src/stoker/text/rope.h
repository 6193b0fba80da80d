// mRoPE position ids of Qwen2-VL / Qwen2.5-VL / Qwen3-VL: what transformers'
// get_rope_index computes for one un-padded sequence with images, and the four-row
// layout for packed sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/text/chat_template.h"

namespace stoker::text {

// Token ids the position rule looks for (§1.2 of the spec; identical in all three
// families).
inline constexpr int64_t kVisionStartId = 151652;
inline constexpr int64_t kImagePadId = 151655;
inline constexpr int64_t kVideoPadId = 151656;

struct RopeIds {
  int64_t vision_start = kVisionStartId;
  int64_t image_pad = kImagePadId;
  int64_t merge_size = kSpatialMergeSize;
};

// Position ids [3][L] (temporal, height, width rows, row-major in `positions`) for
// `ids` with the images' grids in order. Text advances by one per token; an image's
// block is (base, base+row, base+col) with base = the position after the preceding
// text; text after it resumes at max(block) + 1. For images the three families agree
// (they differ only for videos, which this does not take). Also returns
// rope_delta = max position + 1 - L. Errors when the ids name more images than grids,
// or an image's run of pads is shorter than its grid says.
Status MRopePositions(std::span<const int64_t> ids, const std::vector<ImageGrid>& grids,
                      const RopeIds& rope_ids, std::vector<int64_t>* positions,
                      int64_t* rope_delta);

// Packs several samples' [3][L_i] position ids into one [4][sum L_i] block (spec §14.6):
// row 0 is the plain text position 0..L_i-1 restarting in every sample (FlashAttention
// reads sequence starts from its zeros), rows 1-3 are each sample's own mRoPE rows.
std::vector<int64_t> PackPositions(const std::vector<std::span<const int64_t>>& samples);

}  // namespace stoker::text
