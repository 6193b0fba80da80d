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

// Building blocks of the hand-written scanners. Each scanner resolves its pattern as
// Oniguruma does: at each position the first alternative that matches wins;
// quantifiers are greedy and give back only as far as the rest of the alternative needs.
struct Char {
  char32_t cp;
  int len;
  uint16_t cls;
};

[[gnu::always_inline]] inline uint16_t AsciiClasses(uint8_t b) {
  if (b >= 'a' && b <= 'z') return kLetter | kLowerLike;
  if (b >= 'A' && b <= 'Z') return kLetter | kUpperLike;
  if (b >= '0' && b <= '9') return kNumber;
  if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return kSpace;
  return 0;
}

// Inlined into every scanner loop: returned through memory, the struct would cost a
// store-forwarding stall per character.
[[gnu::always_inline]] inline Char At(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) return {b, 1, AsciiClasses(b)};
  Char c;
  c.cp = DecodeUtf8(s, i, &c.len);
  c.cls = CharClasses(c.cp);
  return c;
}

bool IsCrLf(char32_t cp) { return cp == '\r' || cp == '\n'; }
// [^\s\p{L}\p{N}]
bool IsOther(const Char& c) { return (c.cls & (kLetter | kNumber | kSpace)) == 0; }
// [^\r\n\p{L}\p{N}]: the optional lead character of a word.
bool IsWordLead(const Char& c) { return !IsCrLf(c.cp) && (c.cls & (kLetter | kNumber)) == 0; }

// End of the longest run starting at i of characters whose classes include `bits`.
size_t RunOf(std::string_view s, size_t i, uint16_t bits) {
  while (i < s.size()) {
    const Char c = At(s, i);
    if ((c.cls & bits) == 0) break;
    i += c.len;
  }
  return i;
}

// Case-insensitive ASCII letter test that also accepts U+017F (long s), whose case
// fold is 's'. No other code point folds to the letters of the contractions.
int FoldedLetterLen(std::string_view s, size_t i, char lower) {
  if (i >= s.size()) return 0;
  const auto b = static_cast<uint8_t>(s[i]);
  if (b == static_cast<uint8_t>(lower) || b == static_cast<uint8_t>(lower - 32)) return 1;
  if (lower == 's' && b == 0xC5 && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) == 0xBF) {
    return 2;
  }
  return 0;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at p: the end, or 0.
size_t Contraction(std::string_view s, size_t p) {
  if (p >= s.size() || s[p] != '\'') return 0;
  static constexpr const char* kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (const char* suffix : kSuffixes) {
    size_t i = p + 1;
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

// ` ?[^\s\p{L}\p{N}]+` followed by a run of `trail` characters (CR/LF, and '/' when
// `slash`): the end, or 0.
size_t Punctuation(std::string_view s, size_t p, const Char& c0, bool slash) {
  const size_t n = s.size();
  size_t q = p;
  if (c0.cp == ' ' && p + 1 < n) q = p + 1;
  if (q >= n || !IsOther(At(s, q))) return 0;
  while (q < n) {
    const Char c = At(s, q);
    if (!IsOther(c)) break;
    q += c.len;
  }
  while (q < n && (s[q] == '\r' || s[q] == '\n' || (slash && s[q] == '/'))) ++q;
  return q;
}

// The shared whitespace tail \s*[\r\n]+|\s+(?!\S)|\s+ at p (s[p] is whitespace).
size_t Whitespace(std::string_view s, size_t p) {
  const size_t n = s.size();
  const size_t run_end = RunOf(s, p, kSpace);
  // \s*[\r\n]+ — \s* gives back until a CR/LF can follow; the last CR/LF of the
  // whitespace run is where [\r\n]+ starts, and nothing after it in the run is CR/LF.
  size_t last_crlf = std::string_view::npos;
  size_t last_start = p;
  for (size_t i = p; i < run_end;) {
    const Char c = At(s, i);
    if (IsCrLf(c.cp)) last_crlf = i;
    last_start = i;
    i += c.len;
  }
  if (last_crlf != std::string_view::npos) return last_crlf + 1;
  // \s+(?!\S) — the whole run if the text ends there, else the run minus its last
  // character (which is then followed by whitespace), if that leaves anything.
  if (run_end == n) return run_end;
  if (last_start > p) return last_start;
  return run_end;  // \s+
}

// Scanner for kQwenPattern.
class QwenMatcher final : public PatternMatcher {
 public:
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    for (size_t p = 0; p < text.size();) {
      const size_t e = MatchAt(text, p);
      out->push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(e)});
      p = e;
    }
  }

 private:
  static size_t MatchAt(std::string_view s, size_t p) {
    if (size_t e = Contraction(s, p)) return e;  // (?i:'s|...)
    const Char c0 = At(s, p);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0.cls & kLetter) return RunOf(s, p, kLetter);
    if (IsWordLead(c0) && p + c0.len < s.size() && (At(s, p + c0.len).cls & kLetter)) {
      return RunOf(s, p + c0.len, kLetter);
    }
    if (c0.cls & kNumber) return p + c0.len;  // \p{N}
    if (size_t e = Punctuation(s, p, c0, false)) return e;
    return Whitespace(s, p);  // every other character matched above
  }
};

// Scanner for kO200kPattern. U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
// W = [\p{Ll}\p{Lm}\p{Lo}\p{M}]; they share Lm, Lo and M.
class O200kMatcher final : public PatternMatcher {
 public:
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    for (size_t p = 0; p < text.size();) {
      const size_t e = MatchAt(text, p);
      if (e == 0) {  // no alternative matches here: the search moves on by one char
        p += At(text, p).len;
        continue;
      }
      out->push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(e)});
      p = e;
    }
  }

 private:
  static size_t WithContraction(std::string_view s, size_t e) {
    const size_t c = Contraction(s, e);
    return c ? c : e;
  }

  // U*W+ from q: U* takes the longest run, then gives back until a W character
  // follows; W+ then takes its longest run. The end, or 0.
  static size_t UpperThenLower(std::string_view s, size_t q) {
    size_t last_w = std::string_view::npos;  // start of the last W character in U*
    size_t i = q;
    while (i < s.size()) {
      const Char c = At(s, i);
      if (!(c.cls & kUpperLike)) break;
      if (c.cls & kLowerLike) last_w = i;
      i += c.len;
    }
    if (i < s.size() && (At(s, i).cls & kLowerLike)) return RunOf(s, i, kLowerLike);
    if (last_w != std::string_view::npos) return RunOf(s, last_w, kLowerLike);
    return 0;
  }

  // U+W* from q: the end, or 0.
  static size_t LowerAfterUpper(std::string_view s, size_t q) {
    const size_t u = RunOf(s, q, kUpperLike);
    if (u == q) return 0;
    return RunOf(s, u, kLowerLike);
  }

  static size_t MatchAt(std::string_view s, size_t p) {
    const Char c0 = At(s, p);
    const bool lead = IsWordLead(c0) && p + c0.len < s.size();
    // [^\r\n\p{L}\p{N}]?U*W+(contraction)? — with the lead character first, then without.
    if (lead) {
      if (size_t e = UpperThenLower(s, p + c0.len)) return WithContraction(s, e);
    }
    if (size_t e = UpperThenLower(s, p)) return WithContraction(s, e);
    // [^\r\n\p{L}\p{N}]?U+W*(contraction)?
    if (lead) {
      if (size_t e = LowerAfterUpper(s, p + c0.len)) return WithContraction(s, e);
    }
    if (size_t e = LowerAfterUpper(s, p)) return WithContraction(s, e);
    // \p{N}{1,3}
    if (c0.cls & kNumber) {
      size_t e = p + c0.len;
      for (int k = 1; k < 3 && e < s.size(); ++k) {
        const Char c = At(s, e);
        if (!(c.cls & kNumber)) break;
        e += c.len;
      }
      return e;
    }
    if (size_t e = Punctuation(s, p, c0, true)) return e;
    if (c0.cls & kSpace) return Whitespace(s, p);
    // Unreachable for valid text (U and W together cover \p{L}), kept for safety.
    return 0;
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

std::unique_ptr<PatternMatcher> MakeO200kMatcher() {
  return std::make_unique<O200kMatcher>();
}

Result<std::unique_ptr<PatternMatcher>> MakeMatcher(std::string_view pattern,
                                                    bool allow_hand_written) {
  if (allow_hand_written && pattern == kQwenPattern) return MakeQwenMatcher();
  if (allow_hand_written && pattern == kO200kPattern) return MakeO200kMatcher();
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
