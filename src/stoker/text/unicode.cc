#include "stoker/text/unicode.h"

#include <oniguruma.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>
#include <string>

namespace stoker::text {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr int kBlockBits = 8;  // classes are computed 256 code points at a time
constexpr size_t kNumBlocks = (kMaxCodePoint >> kBlockBits) + 1;

// One anchored regex per class, asked about each code point. Asking Oniguruma (rather
// than a Unicode library) keeps the hand-written splitter in step with the engine's own
// Unicode tables, whatever Unicode version each carries.
class ClassProbe {
 public:
  ClassProbe() {
    static std::once_flag init;
    std::call_once(init, [] {
      OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
      onig_initialize(encodings, 1);
    });
    static constexpr const char* kPatterns[kNumClasses] = {
        "\\p{L}", "\\p{N}", "\\s", "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]",
        "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"};
    for (int i = 0; i < kNumClasses; ++i) {
      OnigErrorInfo info;
      const auto* p = reinterpret_cast<const OnigUChar*>(kPatterns[i]);
      const auto* e = p + std::char_traits<char>::length(kPatterns[i]);
      if (onig_new(&regex_[i], p, e, ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY,
                   &info) != ONIG_NORMAL) {
        regex_[i] = nullptr;
      }
    }
    region_ = onig_region_new();
  }
  ~ClassProbe() {
    for (OnigRegex r : regex_) {
      if (r) onig_free(r);
    }
    onig_region_free(region_, 1);
  }

  uint16_t Classify(char32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    std::string s;
    AppendUtf8(cp, &s);
    const auto* b = reinterpret_cast<const OnigUChar*>(s.data());
    static constexpr uint16_t kBits[kNumClasses] = {kLetter, kNumber, kSpace, kUpperLike,
                                                    kLowerLike};
    uint16_t bits = 0;
    for (int i = 0; i < kNumClasses; ++i) {
      if (regex_[i] &&
          onig_match(regex_[i], b, b + s.size(), b, region_, ONIG_OPTION_NONE) ==
              static_cast<int>(s.size())) {
        bits |= kBits[i];
      }
    }
    return bits;
  }

 private:
  static constexpr int kNumClasses = 5;
  OnigRegex regex_[kNumClasses] = {};
  OnigRegion* region_ = nullptr;
};

using Block = std::array<uint16_t, 1u << kBlockBits>;

std::atomic<const Block*>* Blocks() {
  static auto* blocks = new std::atomic<const Block*>[kNumBlocks]();  // lives forever
  return blocks;
}

const Block* FillBlock(size_t index) {
  static std::mutex mu;  // guards the probe; blocks are published atomically
  static ClassProbe* probe = new ClassProbe();
  std::lock_guard<std::mutex> lock(mu);
  std::atomic<const Block*>& slot = Blocks()[index];
  if (const Block* done = slot.load(std::memory_order_acquire)) return done;
  auto* block = new Block();
  for (size_t i = 0; i < block->size(); ++i) {
    (*block)[i] = probe->Classify(static_cast<char32_t>((index << kBlockBits) | i));
  }
  slot.store(block, std::memory_order_release);
  return block;
}

}  // namespace

uint16_t CharClasses(char32_t cp) {
  if (cp > kMaxCodePoint) return 0;
  const size_t index = cp >> kBlockBits;
  const Block* block = Blocks()[index].load(std::memory_order_acquire);
  if (block == nullptr) block = FillBlock(index);
  return (*block)[cp & ((1u << kBlockBits) - 1)];
}

namespace {

// What a UTF-8 lead byte (>= 0x80) asks of the bytes after it (RFC 3629, Table 3-7 of
// the Unicode standard): how many continuation bytes, and the range allowed for the
// first of them (narrower after E0, ED, F0, F4 to exclude overlongs and surrogates).
// `need` is 0 for a byte that cannot start a sequence.
struct Utf8Lead {
  int need;
  uint8_t lo;
  uint8_t hi;
};

Utf8Lead ClassifyLead(uint8_t b0) {
  if (b0 >= 0xC2 && b0 <= 0xDF) return {1, 0x80, 0xBF};
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    return {2, static_cast<uint8_t>(b0 == 0xE0 ? 0xA0 : 0x80),
            static_cast<uint8_t>(b0 == 0xED ? 0x9F : 0xBF)};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    return {3, static_cast<uint8_t>(b0 == 0xF0 ? 0x90 : 0x80),
            static_cast<uint8_t>(b0 == 0xF4 ? 0x8F : 0xBF)};
  }
  return {0, 0, 0};
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    const auto [need, lo, hi] = ClassifyLead(b0);
    if (need == 0) {
      return false;
    }
    if (i + static_cast<size_t>(need) >= n) return false;
    for (int k = 1; k <= need; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return false;
    }
    i += need + 1;
  }
  return true;
}

namespace {

// Code points that NFC may change or merge with what precedes them: those with a
// non-zero combining class, a canonical decomposition, Hangul vowel/trailing jamo
// (composed by rule), and starters that are the second half of a canonical pair (e.g.
// U+0BBE). Every other character is a "stable" starter: nothing before it reorders
// or composes across it, so normalization can be cut just before it. Built once from
// utf8proc's tables, so it follows utf8proc's Unicode version.
class NormalizationQuickCheck {
 public:
  NormalizationQuickCheck() : unstable_(kMaxCodePoint + 1, false) {
    for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
      if (p->combining_class != 0) unstable_[cp] = true;
      if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) {
        unstable_[cp] = true;
        utf8proc_int32_t parts[8];
        const utf8proc_ssize_t n = utf8proc_decompose_char(
            static_cast<utf8proc_int32_t>(cp), parts, 8, UTF8PROC_DECOMPOSE, nullptr);
        // The last part of a canonical pair may be a starter that composes backwards.
        if (n >= 2 && n <= 8) unstable_[static_cast<char32_t>(parts[n - 1])] = true;
      }
    }
    // Hangul vowel and trailing jamo compose with what precedes them by rule.
    for (char32_t cp = 0x1160; cp <= 0x11FF; ++cp) unstable_[cp] = true;
  }

  bool Unstable(char32_t cp) const { return unstable_[cp]; }

  // True if `s` (valid UTF-8) is certainly unchanged by canonical normalization.
  bool Stable(std::string_view s) const {
    for (size_t i = 0; i < s.size();) {
      // Nothing below U+0300 (lead bytes < 0xCC) is unstable.
      if (static_cast<uint8_t>(s[i]) < 0xCC) {
        ++i;
        continue;
      }
      int len;
      const char32_t cp = DecodeUtf8(s, i, &len);
      if (unstable_[cp]) return false;
      i += len;
    }
    return true;
  }

 private:
  std::vector<bool> unstable_;
};

const NormalizationQuickCheck& QuickCheck() {
  static const NormalizationQuickCheck* check = new NormalizationQuickCheck();  // kept
  return *check;
}

}  // namespace

namespace {
Status NormalizeWhole(NormalizationForm form, std::string_view s, std::string* out);
}  // namespace

Status NormalizeWholeText(NormalizationForm form, std::string_view s, std::string* out) {
  if (form == NormalizationForm::kNone) {
    out->append(s);
    return Status::OK();
  }
  return NormalizeWhole(form, s, out);
}

Status Normalize(NormalizationForm form, std::string_view s, std::string* out) {
  if (form == NormalizationForm::kNone) {
    out->append(s);
    return Status::OK();
  }
  // Only NFC takes the shortcut (NFD splits Latin-1 letters, compatibility forms map
  // e.g. U+00A0): copy stable stretches, normalize only the pieces that start at the
  // stable character before an unstable one and end before the next stable one.
  // Characters below U+0300 are NFC-stable starters that no later character composes
  // into except through a combining mark (itself unstable).
  if (form != NormalizationForm::kNFC) {
    return NormalizeWhole(form, s, out);
  }
  const NormalizationQuickCheck& check = QuickCheck();
  size_t copied = 0;       // s[0, copied) is in *out
  size_t last_start = 0;   // start of the most recent character
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0xCC) {  // a character below U+0300 (or a continuation byte of one)
      if ((b & 0xC0) != 0x80) last_start = i;
      ++i;
      continue;
    }
    int len;
    const char32_t cp = DecodeUtf8(s, i, &len);
    if (!check.Unstable(cp)) {
      last_start = i;
      i += len;
      continue;
    }
    // An unstable run: from the character before it (its possible base) to the next
    // stable character.
    const size_t begin = std::max(copied, i > 0 ? last_start : 0);
    size_t end = i + len;
    while (end < s.size()) {
      if (static_cast<uint8_t>(s[end]) < 0xCC) break;
      int l;
      if (!check.Unstable(DecodeUtf8(s, end, &l))) break;
      end += l;
    }
    out->append(s.substr(copied, begin - copied));
    STOKER_RETURN_NOT_OK(NormalizeWhole(form, s.substr(begin, end - begin), out));
    copied = end;
    last_start = end;
    i = end;
  }
  out->append(s.substr(copied));
  return Status::OK();
}

namespace {

Status NormalizeWhole(NormalizationForm form, std::string_view s, std::string* out) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case NormalizationForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizationForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizationForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    case NormalizationForm::kNone: break;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                   static_cast<utf8proc_ssize_t>(s.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (len < 0) {
    return status::InvalidArgument("text normalization failed: ", utf8proc_errmsg(len));
  }
  out->append(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
  std::free(result);
  return Status::OK();
}

}  // namespace

std::string Utf8Lossy(std::string_view bytes) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto b0 = static_cast<uint8_t>(bytes[i]);
    if (b0 < 0x80) {
      out.push_back(static_cast<char>(b0));
      ++i;
      continue;
    }
    const auto [need, lo, hi] = ClassifyLead(b0);
    if (need == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    // Consume the longest valid prefix of the sequence; if it is incomplete, that
    // prefix (the "maximal subpart") becomes one replacement character.
    int got = 0;
    while (got < need && i + 1 + got < n) {
      const auto b = static_cast<uint8_t>(bytes[i + 1 + got]);
      const bool ok = got == 0 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++got;
    }
    if (got == need) {
      out.append(bytes.substr(i, need + 1));
    } else {
      out.append(kReplacement);
    }
    i += 1 + got;
  }
  return out;
}

}  // namespace stoker::text
