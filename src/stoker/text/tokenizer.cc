#include "stoker/text/tokenizer.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace stoker::text {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Status Unsupported(std::string_view what, std::string_view detail) {
  return status::InvalidArgument("tokenizer.json: unsupported ", what, " '", detail, "'");
}

std::string_view TypeOf(element e) {
  std::string_view type;
  if (e.is_object() && e["type"].get_string().get(type) == simdjson::SUCCESS) return type;
  return {};
}

bool BoolField(object o, const char* key, bool fallback) {
  bool value;
  return o[key].get_bool().get(value) == simdjson::SUCCESS ? value : fallback;
}

Status ParseNormalizer(element e, std::vector<NormalizationForm>* out) {
  if (e.is_null()) return Status::OK();
  const std::string_view type = TypeOf(e);
  if (type == "Sequence") {
    array list;
    if (e["normalizers"].get_array().get(list) != simdjson::SUCCESS) {
      return status::InvalidArgument("tokenizer.json: normalizer Sequence without a list");
    }
    for (element child : list) STOKER_RETURN_NOT_OK(ParseNormalizer(child, out));
    return Status::OK();
  }
  if (type == "NFC") out->push_back(NormalizationForm::kNFC);
  else if (type == "NFD") out->push_back(NormalizationForm::kNFD);
  else if (type == "NFKC") out->push_back(NormalizationForm::kNFKC);
  else if (type == "NFKD") out->push_back(NormalizationForm::kNFKD);
  else return Unsupported("normalizer", type);
  return Status::OK();
}

Result<SplitBehavior> ParseBehavior(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Unsupported("Split behavior", name);
}

Status ParsePreTokenizer(element e, const TokenizerOptions& options,
                         std::vector<PreTokenizerStep>* out) {
  if (e.is_null()) return Status::OK();
  const std::string_view type = TypeOf(e);
  if (type == "Sequence") {
    array list;
    if (e["pretokenizers"].get_array().get(list) != simdjson::SUCCESS) {
      return status::InvalidArgument("tokenizer.json: pre_tokenizer Sequence without a list");
    }
    for (element child : list) STOKER_RETURN_NOT_OK(ParsePreTokenizer(child, options, out));
    return Status::OK();
  }
  object o = e.get_object().value_unsafe();
  PreTokenizerStep step;
  if (type == "Split") {
    std::string_view pattern;
    std::string regex;
    if (o["pattern"]["Regex"].get_string().get(pattern) == simdjson::SUCCESS) {
      regex = std::string(pattern);
    } else if (o["pattern"]["String"].get_string().get(pattern) == simdjson::SUCCESS) {
      regex = EscapeRegex(pattern);
    } else {
      return status::InvalidArgument("tokenizer.json: Split without a Regex or String pattern");
    }
    std::string_view behavior = "Isolated";
    if (o["behavior"].get_string().get(behavior)) {}
    STOKER_ASSIGN_OR_RETURN(step.behavior, ParseBehavior(behavior));
    step.invert = BoolField(o, "invert", false);
    STOKER_ASSIGN_OR_RETURN(auto matcher, MakeMatcher(regex, options.hand_written_splitter));
    step.matcher = std::move(matcher);
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = BoolField(o, "add_prefix_space", true);
    step.use_regex = BoolField(o, "use_regex", true);
    if (step.use_regex) {
      STOKER_ASSIGN_OR_RETURN(auto matcher, MakeMatcher(kGpt2Pattern, false));
      step.matcher = std::move(matcher);
    }
  } else {
    return Unsupported("pre_tokenizer", type);
  }
  out->push_back(std::move(step));
  return Status::OK();
}

// A merge is "a b" (split at the first space) or ["a", "b"].
Status ParseMerges(array merges, std::vector<std::pair<std::string, std::string>>* out) {
  out->reserve(merges.size());
  for (element m : merges) {
    std::string_view s;
    if (m.get_string().get(s) == simdjson::SUCCESS) {
      const size_t space = s.find(' ');
      if (space == std::string_view::npos) {
        return status::InvalidArgument("tokenizer.json: merge '", s, "' has no space");
      }
      out->emplace_back(std::string(s.substr(0, space)), std::string(s.substr(space + 1)));
      continue;
    }
    array pair;
    std::string_view a, b;
    if (m.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
        pair.at(0).get_string().get(a) != simdjson::SUCCESS ||
        pair.at(1).get_string().get(b) != simdjson::SUCCESS) {
      return status::InvalidArgument("tokenizer.json: a merge is neither \"a b\" nor [a, b]");
    }
    out->emplace_back(std::string(a), std::string(b));
  }
  return Status::OK();
}

bool IsWordChar(char32_t cp) { return (CharClasses(cp) & (kLetter | kNumber)) != 0; }
bool IsSpaceChar(char32_t cp) { return (CharClasses(cp) & kSpace) != 0; }

// Last / first code point of a string (valid UTF-8, non-empty).
char32_t LastChar(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  int len;
  return DecodeUtf8(s, i, &len);
}

}  // namespace

namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return status::NotFound("cannot open tokenizer file: ", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// What Stoker uses from tokenizer_config.json: split_special_tokens and the names of
// the special tokens (a string, or an object with "content").
struct TokenizerConfig {
  std::optional<bool> split_special_tokens;
  std::vector<std::pair<std::string, std::string>> tokens;
};

Result<TokenizerConfig> ParseConfig(const std::string& json, const std::string& path) {
  simdjson::dom::parser parser;
  element doc;
  object root;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(root) != simdjson::SUCCESS) {
    return status::InvalidArgument(path, ": not a JSON object");
  }
  TokenizerConfig config;
  bool split;
  if (root["split_special_tokens"].get_bool().get(split) == simdjson::SUCCESS) {
    config.split_special_tokens = split;
  }
  for (const char* name : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    element value;
    if (root[name].get(value) != simdjson::SUCCESS) continue;
    std::string_view content;
    if (value.get_string().get(content) == simdjson::SUCCESS ||
        (value.is_object() && value["content"].get_string().get(content) == simdjson::SUCCESS)) {
      config.tokens.emplace_back(name, std::string(content));
    }
  }
  return config;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::FromFile(const std::string& path,
                                                             TokenizerOptions options) {
  namespace fs = std::filesystem;
  std::string file = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) file = (fs::path(path) / "tokenizer.json").string();
  STOKER_ASSIGN_OR_RETURN(std::string json, ReadText(file));
  TokenizerConfig config;
  const std::string config_path = (fs::path(file).parent_path() / "tokenizer_config.json").string();
  if (fs::is_regular_file(config_path, ec)) {
    STOKER_ASSIGN_OR_RETURN(std::string text, ReadText(config_path));
    STOKER_ASSIGN_OR_RETURN(config, ParseConfig(text, config_path));
    if (config.split_special_tokens && options.split_special_tokens_from_config) {
      options.split_special_tokens = *config.split_special_tokens;
    }
  }
  auto parsed = Parse(json, options);
  if (!parsed.ok()) return parsed.status().WithContext(file);
  (*parsed)->config_tokens_ = std::move(config.tokens);
  return std::shared_ptr<const Tokenizer>(std::move(*parsed));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::FromJson(std::string_view json,
                                                             TokenizerOptions options) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Tokenizer> tokenizer, Parse(json, options));
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::Parse(std::string_view json,
                                                    const TokenizerOptions& options) {
  simdjson::dom::parser parser;
  element doc;
  if (auto error = parser.parse(json.data(), json.size(), true).get(doc)) {
    return status::InvalidArgument("tokenizer.json is not valid JSON: ",
                                   simdjson::error_message(error));
  }
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->split_special_tokens_ = options.split_special_tokens;
  object model;
  if (doc["model"].get_object().get(model) != simdjson::SUCCESS) {
    return status::InvalidArgument("tokenizer.json: no model");
  }
  std::string_view model_type = "BPE";
  if (model["type"].get_string().get(model_type)) {}
  if (model_type != "BPE") return Unsupported("model", model_type);

  element normalizer;
  if (doc["normalizer"].get(normalizer) == simdjson::SUCCESS) {
    STOKER_RETURN_NOT_OK(ParseNormalizer(normalizer, &t->normalizations_));
  }

  std::vector<PreTokenizerStep> steps;
  element pre;
  if (doc["pre_tokenizer"].get(pre) == simdjson::SUCCESS) {
    STOKER_RETURN_NOT_OK(ParsePreTokenizer(pre, options, &steps));
  }
  // The prefix space is kept beside a piece rather than in the text, which is exact
  // only when nothing splits after it.
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == PreTokenizerStep::Kind::kByteLevel && steps[i].add_prefix_space &&
        (steps[i].use_regex || i + 1 != steps.size())) {
      return Unsupported("pre_tokenizer", "ByteLevel add_prefix_space followed by a split");
    }
  }
  t->pre_tokenizer_ = std::make_unique<PreTokenizer>(std::move(steps));
  if (!t->pre_tokenizer_->byte_level()) {
    return Unsupported("pre_tokenizer", "without ByteLevel (only byte-level BPE is supported)");
  }

  double dropout;
  if (model["dropout"].get_double().get(dropout) == simdjson::SUCCESS && dropout > 0) {
    return Unsupported("BPE option", "dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string_view value;
    if (model[key].get_string().get(value) == simdjson::SUCCESS && !value.empty()) {
      return Unsupported("BPE option", key);
    }
  }
  object vocab_json;
  array merges_json;
  if (model["vocab"].get_object().get(vocab_json) != simdjson::SUCCESS ||
      model["merges"].get_array().get(merges_json) != simdjson::SUCCESS) {
    return status::InvalidArgument("tokenizer.json: BPE model needs 'vocab' and 'merges'");
  }
  std::vector<std::string> vocab;
  for (auto field : vocab_json) {
    uint64_t id;
    if (field.value.get_uint64().get(id) != simdjson::SUCCESS || id > INT32_MAX) {
      return status::InvalidArgument("tokenizer.json: bad id for token '", field.key, "'");
    }
    if (id >= vocab.size()) vocab.resize(id + 1);
    vocab[id] = std::string(field.key);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  STOKER_RETURN_NOT_OK(ParseMerges(merges_json, &merges));
  STOKER_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Make(std::move(vocab), merges,
                                                       BoolField(model, "ignore_merges", false)));
  t->model_ = std::make_unique<BpeModel>(std::move(bpe));

  element decoder;
  if (doc["decoder"].get(decoder) == simdjson::SUCCESS && !decoder.is_null()) {
    if (TypeOf(decoder) != "ByteLevel") return Unsupported("decoder", TypeOf(decoder));
  } else {
    t->byte_level_decoder_ = false;
  }
  element post;
  if (doc["post_processor"].get(post) == simdjson::SUCCESS && !post.is_null() &&
      TypeOf(post) != "ByteLevel") {
    return Unsupported("post_processor", TypeOf(post));
  }

  array added;
  if (doc["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
    for (element e : added) {
      object o;
      std::string_view content;
      uint64_t id;
      if (e.get_object().get(o) != simdjson::SUCCESS ||
          o["content"].get_string().get(content) != simdjson::SUCCESS ||
          o["id"].get_uint64().get(id) != simdjson::SUCCESS || id > INT32_MAX) {
        return status::InvalidArgument("tokenizer.json: malformed entry in added_tokens");
      }
      AddedToken token;
      token.content = std::string(content);
      token.id = static_cast<int32_t>(id);
      token.special = BoolField(o, "special", false);
      token.lstrip = BoolField(o, "lstrip", false);
      token.rstrip = BoolField(o, "rstrip", false);
      token.normalized = BoolField(o, "normalized", !token.special);
      token.single_word = BoolField(o, "single_word", false);
      if (token.content.empty()) continue;
      t->added_.push_back(std::move(token));
    }
  }
  int32_t max_id = static_cast<int32_t>(t->model_->size()) - 1;
  for (const AddedToken& token : t->added_) max_id = std::max(max_id, token.id);
  t->added_index_by_id_.assign(static_cast<size_t>(max_id) + 1, -1);
  std::unordered_set<std::string> distinct;
  for (size_t i = 0; i < t->added_.size(); ++i) {
    AddedToken& token = t->added_[i];
    t->added_index_by_id_[token.id] = static_cast<int32_t>(i);
    std::string normalized;
    if (token.normalized) {
      normalized = token.content;
      for (NormalizationForm form : t->normalizations_) {
        std::string next;
        STOKER_RETURN_NOT_OK(Normalize(form, normalized, &next));
        normalized = std::move(next);
      }
    }
    t->normalized_contents_.push_back(normalized);
    AddedMatcher& matcher = token.normalized ? t->normalized_matcher_ : t->raw_matcher_;
    const std::string& key = token.normalized ? normalized : token.content;
    if (key.empty()) continue;
    matcher.tokens.push_back(static_cast<int32_t>(i));
    matcher.first_byte[static_cast<uint8_t>(key[0])] = true;
    if (t->model_->TokenToId(token.content) < 0) distinct.insert(token.content);
  }
  for (AddedMatcher* matcher : {&t->raw_matcher_, &t->normalized_matcher_}) {
    const auto first = std::find(std::begin(matcher->first_byte),
                                 std::end(matcher->first_byte), true);
    if (first != std::end(matcher->first_byte) &&
        std::count(std::begin(matcher->first_byte), std::end(matcher->first_byte), true) == 1) {
      matcher->only_first_byte = static_cast<int>(first - std::begin(matcher->first_byte));
    }
  }
  size_t model_tokens = 0;  // vocabulary ids may have gaps (o200k's do)
  for (uint32_t id = 0; id < t->model_->size(); ++id) {
    if (!t->model_->token(id).empty()) ++model_tokens;
  }
  t->vocab_size_ = model_tokens + distinct.size();
  return t;
}

void Tokenizer::SplitAdded(std::string_view text, const AddedMatcher& matcher,
                           std::vector<std::pair<int32_t, Span>>* out) const {
  out->clear();
  if (matcher.empty()) {
    out->push_back({-1, {0, static_cast<uint32_t>(text.size())}});
    return;
  }
  const bool normalized = &matcher == &normalized_matcher_;
  size_t start_offset = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (matcher.only_first_byte >= 0) {  // e.g. '<' for every Qwen token: memchr
      const void* next = std::memchr(text.data() + i, matcher.only_first_byte, text.size() - i);
      if (next == nullptr) break;
      i = static_cast<size_t>(static_cast<const char*>(next) - text.data());
    } else if (!matcher.first_byte[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    // Leftmost-longest: at the first position where any token matches, the longest.
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t index : matcher.tokens) {
      const std::string& key = normalized ? normalized_contents_[index] : added_[index].content;
      if (key.size() > best_len && text.compare(i, key.size(), key) == 0) {
        best = index;
        best_len = key.size();
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    size_t start = i;
    size_t stop = i + best_len;
    i = stop;  // the scan resumes after the match, whatever is done with it below
    const AddedToken& token = added_[best];
    // Split special tokens are left in the text (the scan still resumes after them).
    if (split_special_tokens_ && token.special) continue;
    if (token.single_word) {
      const bool start_space = start == 0 || !IsWordChar(LastChar(text.substr(0, start)));
      int len;
      const bool stop_space =
          stop == text.size() || !IsWordChar(DecodeUtf8(text, stop, &len));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t k = s - 1;
        while (k > 0 && (static_cast<uint8_t>(text[k]) & 0xC0) == 0x80) --k;
        int len;
        if (!IsSpaceChar(DecodeUtf8(text, k, &len))) break;
        s = k;
      }
      start = std::max(s, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        int len;
        if (!IsSpaceChar(DecodeUtf8(text, stop, &len))) break;
        stop += len;
      }
    }
    if (start_offset < start) {
      out->push_back({-1, {static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start)}});
    }
    out->push_back({best, {static_cast<uint32_t>(start), static_cast<uint32_t>(stop)}});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    out->push_back(
        {-1, {static_cast<uint32_t>(start_offset), static_cast<uint32_t>(text.size())}});
  }
}

Status Tokenizer::Encode(std::string_view text, TokenizerSession* session,
                         std::vector<int32_t>* ids) const {
  return Encode(text, {}, session, ids, nullptr);
}

Status Tokenizer::Encode(std::string_view text, std::span<const uint32_t> boundaries,
                         TokenizerSession* session, std::vector<int32_t>* ids,
                         std::vector<uint32_t>* regions) const {
  if (!IsValidUtf8(text)) return status::InvalidArgument("text is not valid UTF-8");
  // Region of a token starting at `offset` of the current (maybe normalized) segment,
  // given the boundaries inside that segment in the same coordinates.
  std::vector<uint32_t> local;  // boundaries inside the segment, segment coordinates
  size_t below = 0;             // boundaries before the segment
  auto region_of = [&](size_t offset) {
    size_t k = 0;
    while (k < local.size() && local[k] <= offset) ++k;
    return static_cast<uint32_t>(below + k);
  };
  auto add_id = [&](int32_t id, size_t offset) {
    ids->push_back(id);
    if (regions) regions->push_back(region_of(offset));
  };
  auto collect = [&](Span span) {  // boundaries in [span.begin, span.end)
    local.clear();
    below = 0;
    for (uint32_t b : boundaries) {
      if (b < span.begin || b == 0) {
        ++below;
      } else if (b < span.end) {
        local.push_back(b - span.begin);
      }
    }
    // A boundary at offset 0 of the text counts for every token.
  };

  SplitAdded(text, raw_matcher_, &session->raw_parts);
  // raw_parts is read while normalized_parts and the other buffers are reused.
  for (size_t r = 0; r < session->raw_parts.size(); ++r) {
    const auto [raw_index, raw_span] = session->raw_parts[r];
    if (regions) collect(raw_span);
    if (raw_index >= 0) {
      add_id(added_[raw_index].id, 0);
      continue;
    }
    std::string_view segment = text.substr(raw_span.begin, raw_span.end - raw_span.begin);
    if (!normalizations_.empty()) {
      session->normalized.clear();
      STOKER_RETURN_NOT_OK(Normalize(normalizations_[0], segment, &session->normalized));
      for (size_t k = 1; k < normalizations_.size(); ++k) {
        session->normalize_tmp.clear();
        STOKER_RETURN_NOT_OK(
            Normalize(normalizations_[k], session->normalized, &session->normalize_tmp));
        session->normalized.swap(session->normalize_tmp);
      }
      if (regions && session->normalized != segment) {
        for (uint32_t& b : local) {
          std::string prefix;
          std::string next;
          STOKER_RETURN_NOT_OK(Normalize(normalizations_[0], segment.substr(0, b), &prefix));
          for (size_t k = 1; k < normalizations_.size(); ++k) {
            next.clear();
            STOKER_RETURN_NOT_OK(Normalize(normalizations_[k], prefix, &next));
            prefix.swap(next);
          }
          b = static_cast<uint32_t>(prefix.size());
        }
      }
      segment = session->normalized;
    }
    SplitAdded(segment, normalized_matcher_, &session->normalized_parts);
    for (const auto& [index, span] : session->normalized_parts) {
      if (index >= 0) {
        add_id(added_[index].id, span.begin);
        continue;
      }
      const std::string_view part = segment.substr(span.begin, span.end - span.begin);
      pre_tokenizer_->Run(part, &session->pieces, &session->pre);
      const std::vector<Piece>& pieces = session->pieces;
      // Piece-cache lookups are mostly cache misses: hash every piece and start loading
      // its slot first, then load each entry two pieces ahead of its use.
      std::vector<uint64_t>& hashes = session->piece_hashes;
      hashes.resize(pieces.size());
      const PieceCache& cache = session->bpe.cache;
      for (size_t k = 0; k < pieces.size(); ++k) {
        const Piece& piece = pieces[k];
        const size_t size = piece.end - piece.begin;
        hashes[k] = 0;
        if (piece.prefix_space || size == 0 || size >= PieceCache::kMaxPieceBytes) continue;
        hashes[k] = PieceCache::Hash(part.substr(piece.begin, size));
        cache.PrefetchSlot(hashes[k]);
      }
      for (size_t k = 0; k < pieces.size(); ++k) {
        const Piece& piece = pieces[k];
        if (k + 2 < pieces.size() && hashes[k + 2] != 0) cache.PrefetchEntry(hashes[k + 2]);
        const size_t first = ids->size();
        model_->Encode(part.substr(piece.begin, piece.end - piece.begin), piece.prefix_space,
                       &session->bpe, ids, hashes[k]);
        if (regions) {
          size_t offset = span.begin + piece.begin;
          for (size_t k = first; k < ids->size(); ++k) {
            regions->push_back(region_of(offset));
            offset += model_->token_bytes(static_cast<uint32_t>((*ids)[k])).size() -
                      (k == first && piece.prefix_space ? 1 : 0);
          }
        }
      }
    }
  }
  return Status::OK();
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0) continue;
    const int32_t added =
        static_cast<size_t>(id) < added_index_by_id_.size() ? added_index_by_id_[id] : -1;
    std::string_view token;
    if (added >= 0) {
      if (skip_special_tokens && added_[added].special) continue;
      token = added_[added].content;
    } else if (static_cast<size_t>(id) < model_->size()) {
      token = model_->token(static_cast<uint32_t>(id));
    } else {
      continue;
    }
    if (byte_level_decoder_) {
      if (added >= 0) {
        bytes.append(VocabStringToBytes(token));
      } else {
        bytes.append(model_->token_bytes(static_cast<uint32_t>(id)));
      }
    } else {
      // No decoder: `tokenizers` joins the token strings with spaces.
      if (!first) bytes.push_back(' ');
      bytes.append(token);
    }
    first = false;
  }
  return byte_level_decoder_ ? Utf8Lossy(bytes) : bytes;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& added : added_) {
    if (added.content == token) return added.id;
  }
  const int64_t id = model_->TokenToId(token);
  if (id < 0) return std::nullopt;
  return static_cast<int32_t>(id);
}

std::optional<std::string> Tokenizer::ConfigToken(std::string_view name) const {
  for (const auto& [key, content] : config_tokens_) {
    if (key == name) return content;
  }
  return std::nullopt;
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0) return std::nullopt;
  if (static_cast<size_t>(id) < added_index_by_id_.size() && added_index_by_id_[id] >= 0) {
    return added_[added_index_by_id_[id]].content;
  }
  if (static_cast<size_t>(id) < model_->size() && !model_->token(id).empty()) {
    return model_->token(static_cast<uint32_t>(id));
  }
  return std::nullopt;
}

Status EncodeBatch(const Tokenizer& tokenizer, std::span<const std::string_view> texts,
                   int num_threads, std::vector<std::vector<int32_t>>* out) {
  out->assign(texts.size(), {});
  const int threads =
      std::max(1, std::min<int>(num_threads, static_cast<int>(texts.size())));
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  Status first_error;   // guarded by error_mu
  size_t first_index = texts.size();  // guarded by error_mu
  auto work = [&] {
    TokenizerSession session;
    for (size_t i = next.fetch_add(1); i < texts.size(); i = next.fetch_add(1)) {
      Status st = tokenizer.Encode(texts[i], &session, &(*out)[i]);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (i < first_index) {
          first_index = i;
          first_error = st;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (!first_error.ok()) return first_error.WithContext("text " + std::to_string(first_index));
  return Status::OK();
}

}  // namespace stoker::text
