// Binding of the model-input stage: stoker._stoker.ModelInputs, one configured
// pipeline::SampleProcessor (tokenizer + chat template + vision processor). The loader
// takes it to produce model-input batches; encode() runs the same two phases on one
// sample for stoker.encode_sample. python/stoker/model_inputs.py builds it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <string>
#include <vector>

#include "stoker/binding/binding_util.h"
#include "stoker/pipeline/sample_processor.h"
#include "stoker/text/chat_template.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::binding {

namespace {

// A NumPy array that owns `values`, of the given shape.
template <typename T>
nb::object OwnedArray(std::vector<T> values, DType dtype, std::initializer_list<int64_t> shape) {
  auto owner = std::make_shared<std::vector<T>>(std::move(values));
  TensorView view;
  view.data = owner->data();
  view.dtype = dtype;
  view.ndim = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), view.shape.begin());
  view.owner = std::move(owner);
  return ExportTensor(std::move(view), Framework::kNumpy);
}

class ModelInputs {
 public:
  ModelInputs(nb::handle tokenizer, nb::handle vision_processor, const std::string& model,
              bool exif_transpose, bool alpha_to_white, const std::string& label_mode,
              int64_t max_length, const std::string& overlong, bool add_vision_id,
              bool qwen3_empty_think, bool train_trailing_newline, int64_t pad_id) {
    pipeline::ModelInputOptions options;
    options.tokenizer = TokenizerFromPython(tokenizer);
    options.vision = VisionConfigFromPython(vision_processor);
    options.image.exif_transpose = exif_transpose;
    options.image.alpha_to_white = alpha_to_white;
    options.text.family = Unwrap(text::ParseModelFamily(model));
    options.text.label_mode = Unwrap(text::ParseLabelMode(label_mode));
    options.text.max_length = max_length;
    options.text.chat.add_vision_id = add_vision_id;
    options.text.chat.qwen3_empty_think = qwen3_empty_think;
    options.text.train_trailing_newline = train_trailing_newline;
    if (overlong == "truncate") {
      options.overlong = pipeline::OverlongPolicy::kTruncate;
    } else if (overlong == "drop") {
      options.overlong = pipeline::OverlongPolicy::kDrop;
    } else {
      Throw(status::InvalidArgument("overlong must be 'truncate' or 'drop', got '", overlong,
                                    "'"));
    }
    options.pad_id = pad_id;
    processor_ = Unwrap(pipeline::SampleProcessor::Make(std::move(options)));
  }

  const std::shared_ptr<const pipeline::SampleProcessor>& processor() const {
    return processor_;
  }
  int64_t row_length() const { return processor_->row_length(); }

  // One sample through both phases. Returns the unpadded model inputs as NumPy arrays
  // plus "text", "truncated" and "dropped" (then no arrays but input_ids are filled).
  nb::dict Encode(const std::string& line, const std::string& image_root) const {
    thread_local pipeline::SampleScratch scratch;
    pipeline::PreparedSample sample;
    std::vector<float> pixels;
    Status st;
    {
      nb::gil_scoped_release release;
      st = processor_->Prepare(line, image_root, /*store=*/nullptr, &sample, &scratch,
                               nullptr);
      if (st.ok() && !sample.dropped) {
        pixels.resize(static_cast<size_t>(sample.num_patches() * row_length()));
        st = processor_->WritePixels(sample, pixels, &scratch, nullptr);
      }
    }
    if (!st.ok()) Throw(st);
    if (sample.dropped) {  // no pixels were written
      sample.plans.clear();
      sample.image_refs.clear();
    }
    text::EncodedSample& t = sample.text;
    const int64_t n = static_cast<int64_t>(t.input_ids.size());
    const int64_t images = static_cast<int64_t>(sample.plans.size());
    std::vector<int64_t> grids;
    for (const vision::ImagePlan& plan : sample.plans) {
      grids.insert(grids.end(), {plan.grid_t, plan.grid_h, plan.grid_w});
    }
    const int64_t rows = sample.num_patches();
    nb::dict out;
    out["input_ids"] = OwnedArray(std::move(t.input_ids), DType::kInt64, {n});
    out["labels"] = OwnedArray(std::move(t.labels), DType::kInt64, {n});
    out["attention_mask"] = OwnedArray(std::move(t.attention_mask), DType::kInt64, {n});
    out["position_ids"] = OwnedArray(std::move(t.position_ids), DType::kInt64, {3, n});
    out["rope_delta"] = t.rope_delta;
    out["pixel_values"] =
        OwnedArray(std::move(pixels), DType::kFloat32, {rows, row_length()});
    out["image_grid_thw"] = OwnedArray(std::move(grids), DType::kInt64, {images, 3});
    out["text"] = t.text;
    out["truncated"] = t.truncated;
    out["dropped"] = sample.dropped;
    nb::list refs;
    for (const std::string& ref : sample.image_refs) refs.append(ref);
    out["images"] = refs;
    return out;
  }

 private:
  std::shared_ptr<const pipeline::SampleProcessor> processor_;
};

}  // namespace

std::shared_ptr<const pipeline::SampleProcessor> ModelInputsFromPython(
    nb::handle model_inputs) {
  return CastNative<ModelInputs>(model_inputs, "stoker._stoker.ModelInputs").processor();
}

void RegisterModelInputs(nb::module_& m) {
  nb::class_<ModelInputs>(m, "ModelInputs")
      .def(nb::init<nb::handle, nb::handle, const std::string&, bool, bool, const std::string&,
                    int64_t, const std::string&, bool, bool, bool, int64_t>(),
           "tokenizer"_a, "vision_processor"_a, "model"_a, "exif_transpose"_a,
           "alpha_to_white"_a, "label_mode"_a, "max_length"_a, "overlong"_a,
           "add_vision_id"_a, "qwen3_empty_think"_a, "train_trailing_newline"_a, "pad_id"_a)
      .def_prop_ro("row_length", &ModelInputs::row_length)
      .def("encode", &ModelInputs::Encode, "line"_a, "image_root"_a);
}

}  // namespace stoker::binding
