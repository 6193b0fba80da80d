// Pre-tokenization: cutting normalized text into the pieces BPE encodes one by one,
// as Hugging Face `tokenizers` does it (Split with a regex and a behaviour, ByteLevel,
// or a Sequence of them).
//
// Two engines find the regex matches:
// * hand-written scanners for the two known patterns: Qwen2/2.5/3 (the hot path of
//   every Qwen-VL run) and o200k, and
// * OnigMatcher, Oniguruma itself (the engine `tokenizers` uses), for any other pattern.
// Both report exactly what Oniguruma's find-iteration reports; tests pin them together.
//
// Everything here is immutable after construction and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::text {

// [begin, end) byte offsets.
struct Span {
  uint32_t begin;
  uint32_t end;
};

// Finds the non-overlapping, left-to-right matches of a pattern.
class PatternMatcher {
 public:
  virtual ~PatternMatcher() = default;
  // Appends the matches in `text` to *out.
  virtual void FindMatches(std::string_view text, std::vector<Span>* out) const = 0;
};

// The pre-tokenizer pattern of the Qwen2 / Qwen2.5 / Qwen3 tokenizer.json.
inline constexpr std::string_view kQwenPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The pre-tokenizer pattern of OpenAI's o200k vocabulary (GPT-4o) in tokenizer.json form.
inline constexpr std::string_view kO200kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
    "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The GPT-2 pattern ByteLevel(use_regex=true) splits with.
inline constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Oniguruma (UTF-8, Ruby syntax: what `tokenizers` compiles its patterns with).
Result<std::unique_ptr<PatternMatcher>> MakeOnigMatcher(std::string_view pattern);
// The hand-written scanners for kQwenPattern and kO200kPattern.
std::unique_ptr<PatternMatcher> MakeQwenMatcher();
std::unique_ptr<PatternMatcher> MakeO200kMatcher();
// The hand-written scanner when `pattern` is one it knows and `allow_hand_written`,
// Oniguruma otherwise.
Result<std::unique_ptr<PatternMatcher>> MakeMatcher(std::string_view pattern,
                                                    bool allow_hand_written);
// A regex that matches `literal` exactly (Split with a "String" pattern).
std::string EscapeRegex(std::string_view literal);

enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous,
};

// A piece of the segment being pre-tokenized. `prefix_space` marks a space that
// ByteLevel(add_prefix_space=true) put in front of it.
struct Piece {
  uint32_t begin;
  uint32_t end;
  bool prefix_space = false;
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  // kSplit
  std::shared_ptr<const PatternMatcher> matcher;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel
  bool add_prefix_space = false;
  bool use_regex = false;  // splits with kGpt2Pattern through `matcher`
};

// Reusable buffers of one thread.
struct PreTokenizerScratch {
  std::vector<Piece> next;
  std::vector<Span> matches;
  std::vector<std::pair<Span, bool>> parts;
};

class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Cuts `text` into pieces (cleared first). Pieces are never empty.
  void Run(std::string_view text, std::vector<Piece>* pieces,
           PreTokenizerScratch* scratch) const;

  bool byte_level() const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace stoker::text
