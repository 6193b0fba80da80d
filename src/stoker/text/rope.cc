#include "stoker/text/rope.h"

#include <algorithm>
#include <string>

namespace stoker::text {

Status MRopePositions(std::span<const int64_t> ids, const std::vector<ImageGrid>& grids,
                      const RopeIds& rope_ids, std::vector<int64_t>* positions,
                      int64_t* rope_delta) {
  const size_t n = ids.size();
  positions->assign(3 * n, 0);
  int64_t* t_row = positions->data();
  int64_t* h_row = t_row + n;
  int64_t* w_row = h_row + n;
  // Images are the vision starts followed by an image pad (get_rope_index counts them
  // that way, then takes the first image pad at or after the current position).
  size_t num_images = 0;
  for (size_t s = 0; s + 1 < n; ++s) {
    if (ids[s] == rope_ids.vision_start && ids[s + 1] == rope_ids.image_pad) ++num_images;
  }
  if (num_images > grids.size()) {
    return status::InvalidArgument("the token ids hold ", std::to_string(num_images),
                                   " images but only ", std::to_string(grids.size()),
                                   " image grids were given");
  }
  size_t st = 0;           // next token to place
  int64_t next_base = 0;   // max of the previous block + 1
  for (size_t k = 0; k < num_images; ++k) {
    size_t ed = st;
    while (ed < n && ids[ed] != rope_ids.image_pad) ++ed;
    const ImageGrid& g = grids[k];
    const int64_t gt = g[0], gh = g[1] / rope_ids.merge_size, gw = g[2] / rope_ids.merge_size;
    const size_t count = static_cast<size_t>(gt * gh * gw);
    if (ed + count > n) {
      return status::InvalidArgument("image ", std::to_string(k), " needs ",
                                     std::to_string(count),
                                     " image tokens but the sequence ends first");
    }
    const int64_t base = next_base;
    for (size_t i = st; i < ed; ++i) {
      const int64_t p = base + static_cast<int64_t>(i - st);
      t_row[i] = h_row[i] = w_row[i] = p;
    }
    const int64_t start = base + static_cast<int64_t>(ed - st);
    size_t i = ed;
    for (int64_t tt = 0; tt < gt; ++tt) {
      for (int64_t hh = 0; hh < gh; ++hh) {
        for (int64_t ww = 0; ww < gw; ++ww, ++i) {
          t_row[i] = start + tt;
          h_row[i] = start + hh;
          w_row[i] = start + ww;
        }
      }
    }
    next_base = start + std::max({gt, gh, gw});
    st = ed + count;
  }
  for (size_t i = st; i < n; ++i) {
    const int64_t p = next_base + static_cast<int64_t>(i - st);
    t_row[i] = h_row[i] = w_row[i] = p;
  }
  int64_t max_pos = -1;
  for (int64_t p : *positions) max_pos = std::max(max_pos, p);
  *rope_delta = max_pos + 1 - static_cast<int64_t>(n);
  return Status::OK();
}

std::vector<int64_t> PackPositions(const std::vector<std::span<const int64_t>>& samples) {
  size_t total = 0;
  for (const auto& s : samples) total += s.size() / 3;
  std::vector<int64_t> out(4 * total);
  size_t at = 0;
  for (const auto& s : samples) {
    const size_t len = s.size() / 3;
    for (size_t i = 0; i < len; ++i) {
      out[at + i] = static_cast<int64_t>(i);
      for (size_t row = 0; row < 3; ++row) out[(row + 1) * total + at + i] = s[row * len + i];
    }
    at += len;
  }
  return out;
}

}  // namespace stoker::text
