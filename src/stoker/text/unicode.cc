#include "stoker/text/unicode.h"

#include <oniguruma.h>
#include <simdjson.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
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

constexpr char32_t kMaxCodePoint = detail::kMaxCodePoint;
constexpr int kBlockBits = detail::kClassBlockBits;

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

}  // namespace

namespace detail {

std::atomic<const uint16_t*> g_class_blocks[kNumClassBlocks];

const uint16_t* FillClassBlock(size_t index) {
  static std::mutex mu;  // guards the probe; blocks are published atomically
  static ClassProbe* probe = new ClassProbe();
  std::lock_guard<std::mutex> lock(mu);
  std::atomic<const uint16_t*>& slot = g_class_blocks[index];
  if (const uint16_t* done = slot.load(std::memory_order_acquire)) return done;
  auto* block = new uint16_t[size_t{1} << kBlockBits];  // lives forever
  for (size_t i = 0; i < (size_t{1} << kBlockBits); ++i) {
    block[i] = probe->Classify(static_cast<char32_t>((index << kBlockBits) | i));
  }
  slot.store(block, std::memory_order_release);
  return block;
}

}  // namespace detail

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
  // simdjson's validator (SIMD, runtime-dispatched) implements the same rules as
  // ClassifyLead: no overlongs, no surrogates, nothing above U+10FFFF.
  return simdjson::validate_utf8(s.data(), s.size());
}

namespace {

// Code points that NFC may change or merge with what precedes them: those with a
// non-zero combining class, a canonical decomposition, Hangul vowel/trailing jamo
// (composed by rule), and starters that are the second half of a canonical pair (e.g.
// U+0BBE). Every other character is a "stable" starter: nothing before it reorders
// or composes across it, so normalization can be cut just before it. Built once from
// utf8proc's tables, so it follows utf8proc's Unicode version.
// True if NFC maps the single character `cp` to itself (false for singletons and
// composition exclusions, which NFC_Quick_Check calls No).
bool ComposesBackToItself(char32_t cp) {
  std::string utf8;
  AppendUtf8(cp, &utf8);
  utf8proc_uint8_t* nfc = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                   static_cast<utf8proc_ssize_t>(utf8.size()), &nfc,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const bool same = n >= 0 && std::string_view(reinterpret_cast<const char*>(nfc),
                                               static_cast<size_t>(n)) == utf8;
  std::free(nfc);
  return same;
}

class NormalizationQuickCheck {
 public:
  NormalizationQuickCheck() : unstable_(kMaxCodePoint + 1, false) {
    std::vector<bool> last_parts(kMaxCodePoint + 1, false);
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
        if (n >= 2 && n <= 8) {
          unstable_[static_cast<char32_t>(parts[n - 1])] = true;
          last_parts[static_cast<char32_t>(parts[n - 1])] = true;
        }
      }
    }
    // Hangul vowel and trailing jamo compose with what precedes them by rule.
    for (char32_t cp = 0x1160; cp <= 0x11FF; ++cp) unstable_[cp] = true;
    // Quick check: every unstable character is No or Maybe except combining marks
    // without a decomposition that no composition ends with, and canonical composites
    // that NFC keeps (e.g. U+00E9).
    // Lead byte b starts the code points [first, last]; stable if none is unstable.
    for (int b = 0xC2; b <= 0xF4; ++b) {
      const char32_t first = b < 0xE0 ? char32_t(b & 0x1F) << 6
                             : b < 0xF0 ? char32_t(b & 0x0F) << 12
                                        : char32_t(b & 0x07) << 18;
      const char32_t last = b < 0xE0 ? first + 0x3F : b < 0xF0 ? first + 0xFFF : first + 0x3FFFF;
      bool stable = true;
      for (char32_t cp = first; cp <= last && cp <= kMaxCodePoint && stable; ++cp) {
        stable = !unstable_[cp];
      }
      stable_lead_[b] = stable;
    }
    not_quick_yes_ = unstable_;
    for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
      if (!unstable_[cp] || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
      if (last_parts[cp] || (cp >= 0x1160 && cp <= 0x11FF)) continue;  // Maybe
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
      const bool decomposes = p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0;
      if (decomposes && !ComposesBackToItself(cp)) continue;  // No
      not_quick_yes_[cp] = false;
    }
  }

  bool Unstable(char32_t cp) const { return unstable_[cp]; }
  // True if every character that lead byte `b` (>= 0xC2) starts is stable, e.g. the
  // bytes of CJK ideographs.
  bool StableLead(uint8_t b) const { return stable_lead_[b]; }

  // The quick check of UAX #15 on `s` (valid UTF-8 that starts with a starter): true
  // when `s` is certainly in NFC, i.e. it holds no character whose NFC_Quick_Check is
  // No or Maybe (a superset of those is flagged) and its combining marks are in
  // canonical order. Thai and Devanagari signs, for instance, have a non-zero combining
  // class but change nothing when they are in order.
  bool InNfc(std::string_view s) const {
    uint8_t last = 0;
    for (size_t i = 0; i < s.size();) {
      int len;
      const char32_t cp = DecodeUtf8(s, i, &len);
      i += static_cast<size_t>(len);
      if (not_quick_yes_[cp]) return false;
      const auto ccc = static_cast<uint8_t>(
          utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class);
      if (ccc != 0 && last > ccc) return false;
      last = ccc;
    }
    return true;
  }

 private:
  std::vector<bool> unstable_;
  std::vector<bool> not_quick_yes_;  // NFC_Quick_Check is No or Maybe (or may be)
  bool stable_lead_[256] = {};
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
    // Eight bytes at a time while none is a lead byte >= 0xC0 (ASCII and the
    // continuation bytes of characters already looked at).
    if (i + 8 <= s.size()) {
      const size_t from = i;
      uint64_t word;
      while (i + 8 <= s.size()) {
        std::memcpy(&word, s.data() + i, 8);
        if ((word & (word << 1) & 0x8080808080808080ull) != 0) break;
        i += 8;
      }
      if (i != from) {
        size_t k = i - 1;  // the start of the last character skipped over
        while (k > 0 && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
        last_start = k;
        if (i == s.size()) break;
      }
    }
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0xCC) {  // a character below U+0300 (or a continuation byte of one)
      if ((b & 0xC0) != 0x80) last_start = i;
      ++i;
      continue;
    }
    if (check.StableLead(b)) {  // no character this byte starts is unstable
      last_start = i;
      i += b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
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
    const std::string_view run = s.substr(begin, end - begin);
    if (check.InNfc(run)) {
      out->append(run);
    } else {
      STOKER_RETURN_NOT_OK(NormalizeWhole(form, run, out));
    }
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
