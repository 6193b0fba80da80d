// Binding of the text component: stoker.text.Tokenizer (and, below it, the sample
// encoder). Encoding releases the GIL; each call borrows a session from a small pool
// owned by the Python object, so concurrent Python threads never share scratch.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/binding/binding_util.h"
#include "stoker/text/conversation.h"
#include "stoker/text/rope.h"
#include "stoker/text/sample_encoder.h"
#include "stoker/text/tokenizer.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::binding {

namespace {

class PyTokenizer {
 public:
  explicit PyTokenizer(std::shared_ptr<const text::Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  // split_special_tokens: -1 takes tokenizer_config.json's value (default false).
  static std::unique_ptr<PyTokenizer> FromFile(const std::string& path,
                                               bool hand_written_splitter,
                                               int split_special_tokens) {
    text::TokenizerOptions options;
    options.hand_written_splitter = hand_written_splitter;
    options.split_special_tokens = split_special_tokens > 0;
    options.split_special_tokens_from_config = split_special_tokens < 0;
    Result<std::shared_ptr<const text::Tokenizer>> t = status::Internal("unreachable");
    {
      nb::gil_scoped_release release;
      t = text::Tokenizer::FromFile(path, options);
      // An explicit choice wins over the config file.
      if (t.ok() && split_special_tokens >= 0) {
        options.split_special_tokens = split_special_tokens > 0;
    options.split_special_tokens_from_config = split_special_tokens < 0;
      }
    }
    return std::make_unique<PyTokenizer>(Unwrap(std::move(t)));
  }

  ~PyTokenizer() {
    // Destroyed by Python's garbage collection, so the GIL is held.
    for (PyObject* id : id_objects_) Py_XDECREF(id);
  }

  nb::object Encode(const std::string& text) {
    std::vector<int32_t> ids;
    Status st;
    {
      nb::gil_scoped_release release;
      std::unique_ptr<text::TokenizerSession> session = Borrow();
      st = tokenizer_->Encode(text, session.get(), &ids);
      Return(std::move(session));
    }
    if (!st.ok()) Throw(st);
    return IdList(ids);
  }

  nb::object EncodeBatch(const std::vector<std::string>& texts, int num_threads) {
    std::vector<std::vector<int32_t>> out;
    Status st;
    {
      nb::gil_scoped_release release;
      std::vector<std::string_view> views(texts.begin(), texts.end());
      if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
      st = text::EncodeBatch(*tokenizer_, views, num_threads, &out);
    }
    if (!st.ok()) Throw(st);
    nb::list result;
    for (const std::vector<int32_t>& ids : out) result.append(IdList(ids));
    return std::move(result);
  }

  // A Python list of `ids`. Each id's int object is made once per tokenizer and shared
  // by every list after that: building the lists is then reference counting only,
  // which is most of the cost of returning ids to Python (CPython caches only -5..256).
  // The count lives in the object, a cache miss in a large vocabulary, so the objects
  // (and, further ahead, their pointers) are prefetched for writing.
  nb::object IdList(const std::vector<int32_t>& ids) {
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(ids.size()));
    if (list == nullptr) throw nb::python_error();
    nb::object owned = nb::steal(list);
    if (id_objects_.empty()) MakeIdObjects();
    const size_t n = ids.size(), known = id_objects_.size();
    auto is_known = [known](int32_t id) {
      return id >= 0 && static_cast<size_t>(id) < known;
    };
    constexpr size_t kObjectsAhead = 24, kPointersAhead = 48;
    for (size_t i = 0; i < n; ++i) {
      if (i + kPointersAhead < n && is_known(ids[i + kPointersAhead])) {
        __builtin_prefetch(&id_objects_[static_cast<size_t>(ids[i + kPointersAhead])]);
      }
      if (i + kObjectsAhead < n && is_known(ids[i + kObjectsAhead])) {
        __builtin_prefetch(id_objects_[static_cast<size_t>(ids[i + kObjectsAhead])], 1);
      }
      const int32_t id = ids[i];
      PyObject* obj;
      if (is_known(id)) {
        obj = id_objects_[static_cast<size_t>(id)];
        Py_INCREF(obj);
      } else {
        obj = PyLong_FromLong(id);
        if (obj == nullptr) throw nb::python_error();
      }
      PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), obj);
    }
    return owned;
  }

  // Every id's int object, made in id order so that they lie in consecutive memory:
  // the frequent tokens (low ids, as BPE numbers its merges) then share cache lines.
  void MakeIdObjects() {
    const size_t n = tokenizer_->vocab_size();
    id_objects_.reserve(n);
    for (size_t id = 0; id < n; ++id) {
      PyObject* obj = PyLong_FromSize_t(id);
      if (obj == nullptr) {
        for (PyObject* made : id_objects_) Py_DECREF(made);
        id_objects_.clear();
        throw nb::python_error();
      }
      id_objects_.push_back(obj);
    }
  }

  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) {
    nb::gil_scoped_release release;
    return tokenizer_->Decode(ids, skip_special_tokens);
  }

  const std::shared_ptr<const text::Tokenizer>& tokenizer() const { return tokenizer_; }

  // A session from the pool (a fresh one when all are busy); hand it back with Return.
  std::unique_ptr<text::TokenizerSession> Borrow() {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.empty()) return std::make_unique<text::TokenizerSession>();
    auto session = std::move(idle_.back());
    idle_.pop_back();
    return session;
  }
  void Return(std::unique_ptr<text::TokenizerSession> session) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleSessions) idle_.push_back(std::move(session));
  }

 private:
  static constexpr size_t kMaxIdleSessions = 8;
  std::shared_ptr<const text::Tokenizer> tokenizer_;
  std::mutex mu_;  // guards idle_
  std::vector<std::unique_ptr<text::TokenizerSession>> idle_;
  std::vector<PyObject*> id_objects_;  // by id, made by the first IdList; only under the GIL
};

// A NumPy int64 array owning `values` (shape [rows, n / rows], or [n] for rows == 0).
nb::object Int64Array(std::vector<int64_t> values, int rows = 0) {
  auto owner = std::make_shared<std::vector<int64_t>>(std::move(values));
  TensorView view;
  view.data = owner->data();
  view.dtype = DType::kInt64;
  if (rows > 0) {
    view.ndim = 2;
    view.shape = {rows, static_cast<int64_t>(owner->size()) / rows, 0, 0};
  } else {
    view.ndim = 1;
    view.shape = {static_cast<int64_t>(owner->size()), 0, 0, 0};
  }
  view.owner = std::move(owner);
  return ExportTensor(std::move(view), Framework::kNumpy);
}

nb::dict EncodeSample(const std::string& sample_json, PyTokenizer& tokenizer,
                      const std::string& model, const std::vector<std::vector<int64_t>>& grids,
                      int64_t max_length, const std::string& label_mode, bool add_vision_id,
                      bool add_generation_prompt, bool qwen3_empty_think,
                      bool train_trailing_newline) {
  text::SampleEncodeOptions options;
  options.family = Unwrap(text::ParseModelFamily(model));
  options.label_mode = Unwrap(text::ParseLabelMode(label_mode));
  options.chat.add_vision_id = add_vision_id;
  options.chat.add_generation_prompt = add_generation_prompt;
  options.chat.qwen3_empty_think = qwen3_empty_think;
  options.train_trailing_newline = train_trailing_newline;
  options.max_length = max_length;
  std::vector<text::ImageGrid> image_grids;
  for (const auto& g : grids) {
    if (g.size() != 3) Throw(status::InvalidArgument("an image grid is (t, h, w)"));
    image_grids.push_back({g[0], g[1], g[2]});
  }
  Result<text::EncodedSample> encoded = status::Internal("unreachable");
  std::vector<std::string> images;
  {
    nb::gil_scoped_release release;
    Result<text::Conversation> conv = text::ParseConversation(sample_json);
    if (!conv.ok()) {
      encoded = conv.status();
    } else {
      images = conv->images;
      if (images.size() != image_grids.size()) {
        encoded = status::InvalidArgument(
            "the sample has ", std::to_string(images.size()), " images but ",
            std::to_string(image_grids.size()), " image grids were given");
      } else {
        // A pooled session keeps its piece cache warm from sample to sample.
        std::unique_ptr<text::TokenizerSession> session = tokenizer.Borrow();
        encoded = text::EncodeSample(*tokenizer.tokenizer(), session.get(), *conv,
                                     image_grids, options);
        tokenizer.Return(std::move(session));
      }
    }
  }
  text::EncodedSample sample = Unwrap(std::move(encoded));
  nb::dict out;
  out["text"] = sample.text;
  out["input_ids"] = Int64Array(std::move(sample.input_ids));
  out["labels"] = Int64Array(std::move(sample.labels));
  out["attention_mask"] = Int64Array(std::move(sample.attention_mask));
  out["position_ids"] = Int64Array(std::move(sample.position_ids), 3);
  out["rope_delta"] = sample.rope_delta;
  nb::list image_list;  // those whose tokens survived truncation
  for (int64_t i = 0; i < sample.num_images; ++i) image_list.append(images[i]);
  out["images"] = image_list;
  out["truncated"] = sample.truncated;
  return out;
}

nb::object PackPositionIds(const std::vector<std::vector<int64_t>>& samples) {
  std::vector<std::span<const int64_t>> spans;
  for (const auto& s : samples) {
    if (s.size() % 3 != 0) Throw(status::InvalidArgument("position ids must have 3 rows"));
    spans.emplace_back(s);
  }
  return Int64Array(text::PackPositions(spans), 4);
}

}  // namespace

std::shared_ptr<const text::Tokenizer> TokenizerFromPython(nb::handle tokenizer) {
  return CastNative<PyTokenizer>(tokenizer, "stoker._stoker.Tokenizer").tokenizer();
}

void RegisterText(nb::module_& m) {
  nb::class_<PyTokenizer>(m, "Tokenizer")
      .def_static("from_file", &PyTokenizer::FromFile, "path"_a,
                  "hand_written_splitter"_a = true, "split_special_tokens"_a = -1)
      .def("encode", &PyTokenizer::Encode, "text"_a)
      .def("encode_batch", &PyTokenizer::EncodeBatch, "texts"_a, "num_threads"_a = 0)
      .def("decode", &PyTokenizer::Decode, "ids"_a, "skip_special_tokens"_a = false)
      .def("token_to_id",
           [](const PyTokenizer& self, const std::string& token) {
             return self.tokenizer()->TokenToId(token);
           })
      .def("id_to_token",
           [](const PyTokenizer& self, int32_t id) { return self.tokenizer()->IdToToken(id); })
      .def("config_token",
           [](const PyTokenizer& self, const std::string& name) {
             return self.tokenizer()->ConfigToken(name);
           })
      .def_prop_ro("vocab_size",
                   [](const PyTokenizer& self) { return self.tokenizer()->vocab_size(); });
  m.def("encode_sample", &EncodeSample, "sample_json"_a, "tokenizer"_a, "model"_a,
        "image_grids"_a, "max_length"_a, "label_mode"_a, "add_vision_id"_a,
        "add_generation_prompt"_a, "qwen3_empty_think"_a, "train_trailing_newline"_a);
  m.def("pack_position_ids", &PackPositionIds, "samples"_a);
}

}  // namespace stoker::binding
