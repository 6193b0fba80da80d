#include "stoker/text/pre_tokenizer.h"

#include <oniguruma.h>

#include <mutex>

#include "stoker/text/unicode.h"

namespace stoker::text {

namespace {

void EnsureOnigInitialized() {
  static std::once_flag init;
  std::call_once(init, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// A match region per thread: onig_search writes its result there, and the compiled
// regex itself is only read, so one regex serves every thread.
struct RegionHolder {
  OnigRegion* region = onig_region_new();
  ~RegionHolder() { onig_region_free(region, 1); }
};

class OnigMatcher final : public PatternMatcher {
 public:
  explicit OnigMatcher(OnigRegex regex) : regex_(regex) {}
  ~OnigMatcher() override { onig_free(regex_); }

  // Mirrors the find-iteration of the `onig` crate that `tokenizers` uses: search
  // from the end of the previous match over the whole text (so look-arounds see
  // it); an empty match right at the previous match's end is skipped by one char.
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    thread_local RegionHolder holder;
    const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
    const auto* end = begin + text.size();
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    while (last_end <= text.size()) {
      const int r = onig_search(regex_, begin, end, begin + last_end, end, holder.region,
                                ONIG_OPTION_NONE);
      if (r < 0) break;
      const auto s = static_cast<size_t>(holder.region->beg[0]);
      const auto e = static_cast<size_t>(holder.region->end[0]);
      if (s == e && have_last && last_match_end == e) {
        if (last_end >= text.size()) break;
        int len = 1;
        DecodeUtf8(text, last_end, &len);
        last_end += len;
        continue;
      }
      last_end = e;
      have_last = true;
      last_match_end = e;
      out->push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
      if (s == e && e == text.size()) break;
    }
  }

 private:
  OnigRegex regex_;
};

// Scanner for kQwenPattern. Each alternative below is the pattern's alternative of the
// same number, resolved as Oniguruma resolves it: the first alternative that matches
// at the current position wins; quantifiers are greedy and give back only as far as
// the rest of the alternative needs.
class QwenMatcher final : public PatternMatcher {
 public:
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    const size_t n = text.size();
    size_t p = 0;
    while (p < n) {
      const size_t e = MatchAt(text, p);
      out->push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(e)});
      p = e;
    }
  }

 private:
  struct Char {
    char32_t cp;
    int len;
    uint16_t cls;
  };

  static Char At(std::string_view s, size_t i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) return {b, 1, AsciiClasses(b)};
    Char c;
    c.cp = DecodeUtf8(s, i, &c.len);
    c.cls = CharClasses(c.cp);
    return c;
  }

  static uint16_t AsciiClasses(uint8_t b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return kLetter;
    if (b >= '0' && b <= '9') return kNumber;
    if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return kSpace;
    return 0;
  }

  static bool IsCrLf(char32_t cp) { return cp == '\r' || cp == '\n'; }
  // [^\s\p{L}\p{N}]
  static bool IsOther(const Char& c) { return (c.cls & (kLetter | kNumber | kSpace)) == 0; }

  // End of the longest run starting at i of characters whose classes include `bits`.
  static size_t RunOf(std::string_view s, size_t i, uint16_t bits) {
    while (i < s.size()) {
      const Char c = At(s, i);
      if ((c.cls & bits) == 0) break;
      i += c.len;
    }
    return i;
  }

  // Case-insensitive ASCII letter test that also accepts U+017F (long s), whose case
  // fold is 's'. No other code point folds to the letters of the contractions.
  static int FoldedLetterLen(std::string_view s, size_t i, char lower) {
    if (i >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[i]);
    if (b == static_cast<uint8_t>(lower) || b == static_cast<uint8_t>(lower - 32)) return 1;
    if (lower == 's' && b == 0xC5 && i + 1 < s.size() &&
        static_cast<uint8_t>(s[i + 1]) == 0xBF) {
      return 2;
    }
    return 0;
  }

  // Alternative 1: (?i:'s|'t|'re|'ve|'m|'ll|'d). Returns the end or 0.
  static size_t Contraction(std::string_view s, size_t p) {
    if (s[p] != '\'') return 0;
    const size_t q = p + 1;
    static constexpr const char* kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (const char* suffix : kSuffixes) {
      size_t i = q;
      bool ok = true;
      for (const char* c = suffix; *c; ++c) {
        const int len = FoldedLetterLen(s, i, *c);
        if (len == 0) {
          ok = false;
          break;
        }
        i += len;
      }
      if (ok) return i;
    }
    return 0;
  }

  static size_t MatchAt(std::string_view s, size_t p) {
    const size_t n = s.size();
    if (size_t e = Contraction(s, p)) return e;  // 1
    const Char c0 = At(s, p);
    // 2: [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0.cls & kLetter) return RunOf(s, p, kLetter);
    if (!IsCrLf(c0.cp) && !(c0.cls & kNumber) && p + c0.len < n) {
      const Char c1 = At(s, p + c0.len);
      if (c1.cls & kLetter) return RunOf(s, p + c0.len, kLetter);
    }
    // 3: \p{N}
    if (c0.cls & kNumber) return p + c0.len;
    // 4: ' '?[^\s\p{L}\p{N}]+[\r\n]*
    {
      size_t q = p;
      if (c0.cp == ' ' && p + 1 < n) q = p + 1;
      if (q < n && IsOther(At(s, q))) {
        while (q < n) {
          const Char c = At(s, q);
          if (!IsOther(c)) break;
          q += c.len;
        }
        while (q < n && (s[q] == '\r' || s[q] == '\n')) ++q;
        return q;
      }
    }
    // From here c0 is whitespace (every other character matched above).
    const size_t run_end = RunOf(s, p, kSpace);
    // 5: \s*[\r\n]+ — \s* gives back until a CR/LF can follow; the last CR/LF of the
    // whitespace run is where [\r\n]+ starts, and nothing after it in the run is CR/LF.
    {
      size_t last_crlf = std::string_view::npos;
      for (size_t i = p; i < run_end;) {
        const Char c = At(s, i);
        if (IsCrLf(c.cp)) last_crlf = i;
        i += c.len;
      }
      if (last_crlf != std::string_view::npos) return last_crlf + 1;
    }
    // 6: \s+(?!\S) — the whole run if the text ends there, else the run minus its last
    // character (which is then followed by whitespace), if that leaves anything.
    if (run_end == n) return run_end;
    size_t last_start = p;
    for (size_t i = p; i < run_end;) {
      last_start = i;
      i += At(s, i).len;
    }
    if (last_start > p) return last_start;
    // 7: \s+
    return run_end;
  }
};

}  // namespace

Result<std::unique_ptr<PatternMatcher>> MakeOnigMatcher(std::string_view pattern) {
  EnsureOnigInitialized();
  OnigRegex regex = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&regex, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_RUBY, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, r, &info);
    return status::InvalidArgument("cannot compile split pattern '", pattern,
                                   "': ", reinterpret_cast<const char*>(message));
  }
  return std::unique_ptr<PatternMatcher>(new OnigMatcher(regex));
}

std::unique_ptr<PatternMatcher> MakeQwenMatcher() { return std::make_unique<QwenMatcher>(); }

Result<std::unique_ptr<PatternMatcher>> MakeMatcher(std::string_view pattern,
                                                    bool allow_hand_written) {
  if (allow_hand_written && pattern == kQwenPattern) return MakeQwenMatcher();
  return MakeOnigMatcher(pattern);
}

std::string EscapeRegex(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

bool PreTokenizer::byte_level() const {
  for (const PreTokenizerStep& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::kByteLevel) return true;
  }
  return false;
}

namespace {

// Applies one Split step to `piece` of `text`, appending the resulting pieces.
void SplitPiece(const PreTokenizerStep& step, std::string_view text, const Piece& piece,
                PreTokenizerScratch* scratch, std::vector<Piece>* out) {
  std::vector<Span>& matches = scratch->matches;
  std::vector<std::pair<Span, bool>>& parts = scratch->parts;
  matches.clear();
  parts.clear();
  const std::string_view sub = text.substr(piece.begin, piece.end - piece.begin);
  step.matcher->FindMatches(sub, &matches);
  // (span, is_match) covering the piece, as `tokenizers`' Pattern::find_matches.
  uint32_t prev = 0;
  for (const Span& m : matches) {
    if (prev != m.begin) parts.push_back({{prev, m.begin}, false});
    parts.push_back({m, true});
    prev = m.end;
  }
  if (prev != sub.size()) parts.push_back({{prev, static_cast<uint32_t>(sub.size())}, false});
  if (step.invert) {
    for (auto& part : parts) part.second = !part.second;
  }
  const size_t first = out->size();
  auto emit = [&](Span span) {
    out->push_back({piece.begin + span.begin, piece.begin + span.end, false});
  };
  switch (step.behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& [span, is_match] : parts) {
        if (!is_match) emit(span);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const auto& part : parts) emit(part.first);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& [span, is_match] : parts) {
        if (is_match && !previous_match && out->size() > first) {
          out->back().end = piece.begin + span.end;
        } else {
          emit(span);
        }
        previous_match = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      std::vector<Span> merged;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        const auto& [span, is_match] = *it;
        if (is_match && !previous_match && !merged.empty()) {
          merged.back().begin = span.begin;
        } else {
          merged.push_back(span);
        }
        previous_match = is_match;
      }
      for (auto it = merged.rbegin(); it != merged.rend(); ++it) emit(*it);
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& [span, is_match] : parts) {
        if (is_match == previous_match && out->size() > first) {
          out->back().end = piece.begin + span.end;
        } else {
          emit(span);
        }
        previous_match = is_match;
      }
      break;
    }
  }
  // The first resulting piece keeps a prefix space added by an earlier step.
  if (piece.prefix_space && out->size() > first) (*out)[first].prefix_space = true;
  // Drop empty pieces.
  size_t w = first;
  for (size_t r = first; r < out->size(); ++r) {
    if ((*out)[r].end > (*out)[r].begin || (*out)[r].prefix_space) (*out)[w++] = (*out)[r];
  }
  out->resize(w);
}

}  // namespace

void PreTokenizer::Run(std::string_view text, std::vector<Piece>* pieces,
                       PreTokenizerScratch* scratch) const {
  pieces->clear();
  if (text.empty()) return;
  pieces->push_back({0, static_cast<uint32_t>(text.size()), false});
  for (const PreTokenizerStep& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
      if (step.add_prefix_space) {
        for (Piece& piece : *pieces) {
          if (!piece.prefix_space && text[piece.begin] != ' ') piece.prefix_space = true;
        }
      }
      if (!step.use_regex) continue;
    }
    std::vector<Piece>& next = scratch->next;
    next.clear();
    for (const Piece& piece : *pieces) SplitPiece(step, text, piece, scratch, &next);
    pieces->swap(next);
  }
}

}  // namespace stoker::text
