// Binding of the vision component: stoker._stoker.VisionProcessor (one configured Qwen-VL
// image processor) and smart_resize. The Python face is python/stoker/vision.py, which
// resolves model families and checkpoint configs into the plain numbers passed here.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoker/binding/binding_util.h"
#include "stoker/vision/encoded_image.h"
#include "stoker/vision/image_processor.h"
#include "stoker/vision/output_buffer.h"
#include "stoker/vision/smart_resize.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::binding {

namespace {

using RgbArray = nb::ndarray<const uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using RowsArray = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

vision::ResizeBackend ParseBackend(const std::string& name) {
  if (name == "torchvision") return vision::ResizeBackend::kTorchvision;
  if (name == "pillow") return vision::ResizeBackend::kPillow;
  Throw(status::InvalidArgument("backend must be 'torchvision' or 'pillow', got '", name,
                                "'"));
}

vision::PillowPassOrder ParsePillowOrder(const std::string& name) {
  if (name == "pillow13") return vision::PillowPassOrder::kReductionBased;
  if (name == "pillow12.2") return vision::PillowPassOrder::kTallVerticalFirst;
  if (name == "legacy") return vision::PillowPassOrder::kHorizontalFirst;
  Throw(status::InvalidArgument("pillow_pass_order must be 'pillow13', 'pillow12.2' or "
                                "'legacy', got '", name, "'"));
}

vision::SmartResizeRule ParseRule(const std::string& name) {
  if (name == "hf") return vision::SmartResizeRule::kHuggingFace;
  if (name == "qwen-vl-utils") return vision::SmartResizeRule::kQwenVlUtils;
  Throw(status::InvalidArgument("size_rule must be 'hf' or 'qwen-vl-utils', got '", name,
                                "'"));
}

// Scratch reused by every call made on one thread.
vision::VisionScratch& ThreadScratch() {
  thread_local vision::VisionScratch scratch;
  return scratch;
}

nb::tuple PlanToTuple(const vision::ImagePlan& p) {
  return nb::make_tuple(p.height, p.width, p.resized_height, p.resized_width, p.grid_t,
                        p.grid_h, p.grid_w);
}

// One image of a preprocess call: encoded bytes or a decoded RGB array (views into
// Python objects that the caller's frame keeps alive).
struct Input {
  std::span<const uint8_t> bytes;
  const uint8_t* pixels = nullptr;
  int64_t height = 0, width = 0;
};

class VisionProcessor {
 public:
  VisionProcessor(int patch_size, int merge_size, int temporal_patch_size,
                  std::vector<double> mean, std::vector<double> std, double rescale_factor,
                  int64_t min_pixels, int64_t max_pixels, const std::string& backend,
                  const std::string& size_rule, const std::string& pillow_pass_order,
                  int64_t max_image_pixels)
      : processor_(Make(patch_size, merge_size, temporal_patch_size, mean, std,
                        rescale_factor, min_pixels, max_pixels, backend, size_rule,
                        pillow_pass_order, max_image_pixels)) {}

  int64_t row_length() const { return processor_.row_length(); }
  const vision::ProcessorConfig& config() const { return processor_.config(); }

  nb::tuple PlanSize(int64_t height, int64_t width) const {
    return PlanToTuple(Unwrap(processor_.Plan(height, width)));
  }

  nb::tuple PlanEncoded(nb::bytes data, bool exif_transpose) const {
    vision::EncodedImageOptions options;
    options.exif_transpose = exif_transpose;
    return PlanToTuple(Unwrap(vision::PlanEncodedImage(processor_, BytesSpan(data), options)));
  }

  // items: bytes or uint8 [H, W, 3] C-contiguous arrays; names: one per item, for errors.
  // Returns (pixel_values float32 [patches, row_length], image_grid_thw int64 [n, 3]).
  // With `out` (a writable C-contiguous float32 [rows, row_length] array, rows at least
  // the patches of all images), the rows are written into its first rows instead and
  // the first element returned is the number of rows written.
  nb::tuple Preprocess(nb::list items, std::vector<std::string> names, bool exif_transpose,
                       bool alpha_to_white, nb::object out_object) const {
    RowsArray out_array;
    const bool has_out = !out_object.is_none();
    if (has_out && (!nb::try_cast(out_object, out_array, /*convert=*/false) ||
                    out_array.shape(1) != static_cast<size_t>(processor_.row_length()))) {
      Throw(status::InvalidArgument(
          "out must be a writable C-contiguous float32 array of shape [rows, ",
          std::to_string(processor_.row_length()), "]"));
    }
    const size_t n = nb::len(items);
    if (names.size() != n) Throw(status::InvalidArgument("one name per image expected"));
    std::vector<Input> inputs(n);
    // The array handles stay alive until the end of the call: if nanobind had to
    // convert an input (dtype or layout), the converted copy lives in the handle.
    std::vector<RgbArray> arrays;
    arrays.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      nb::handle item = items[i];
      if (nb::isinstance<nb::bytes>(item)) {
        inputs[i].bytes = BytesSpan(nb::borrow<nb::bytes>(item));
      } else {
        RgbArray array;
        if (!nb::try_cast(item, array) || array.shape(2) != 3) {
          Throw(status::InvalidArgument(names[i], ": expected encoded bytes or a C-contiguous "
                                        "uint8 array of shape [H, W, 3]"));
        }
        inputs[i].pixels = array.data();
        inputs[i].height = static_cast<int64_t>(array.shape(0));
        inputs[i].width = static_cast<int64_t>(array.shape(1));
        arrays.push_back(std::move(array));
      }
    }
    vision::EncodedImageOptions options;
    options.exif_transpose = exif_transpose;
    options.alpha_to_white = alpha_to_white;
    const int64_t row = processor_.row_length();

    // Phase 1: every image's shape from headers / array shapes, before any pixel work.
    std::vector<vision::ImagePlan> plans(n);
    int64_t total_rows = 0;
    Status failure;
    {
      nb::gil_scoped_release release;
      for (size_t i = 0; i < n && failure.ok(); ++i) {
        Result<vision::ImagePlan> plan =
            inputs[i].pixels != nullptr
                ? processor_.Plan(inputs[i].height, inputs[i].width)
                : vision::PlanEncodedImage(processor_, inputs[i].bytes, options);
        if (!plan.ok()) {
          failure = plan.status().WithContext(names[i]);
          break;
        }
        plans[i] = *plan;
        total_rows += plans[i].num_patches();
      }
    }
    if (!failure.ok()) Throw(failure);

    if (has_out && out_array.shape(0) < static_cast<size_t>(total_rows)) {
      Throw(status::InvalidArgument("out has ", std::to_string(out_array.shape(0)),
                                    " rows, the images need ", std::to_string(total_rows)));
    }

    // Phase 2: one output allocation (left uninitialised: every float is written
    // below), or the caller's array, then each image writes its rows in place.
    std::shared_ptr<float> values;
    if (!has_out) values = vision::AllocateOutput(static_cast<size_t>(total_rows * row));
    auto grid = std::make_shared<std::vector<int64_t>>(n * 3);
    {
      nb::gil_scoped_release release;
      vision::VisionScratch& scratch = ThreadScratch();
      float* out = has_out ? out_array.data() : values.get();
      for (size_t i = 0; i < n; ++i) {
        const vision::ImagePlan& plan = plans[i];
        const size_t count = static_cast<size_t>(plan.num_patches() * row);
        std::span<float> rows(out, count);
        Status st =
            inputs[i].pixels != nullptr
                ? processor_.Run(plan,
                                 {inputs[i].pixels,
                                  static_cast<size_t>(plan.height * plan.width * 3)},
                                 rows, scratch)
                : vision::RunEncodedImage(processor_, plan, inputs[i].bytes, options, rows,
                                          scratch);
        if (!st.ok()) {
          failure = st.WithContext(names[i]);
          break;
        }
        (*grid)[i * 3 + 0] = plan.grid_t;
        (*grid)[i * 3 + 1] = plan.grid_h;
        (*grid)[i * 3 + 2] = plan.grid_w;
        out += count;
      }
    }
    if (!failure.ok()) Throw(failure);

    TensorView thw;
    thw.data = grid->data();
    thw.dtype = DType::kInt64;
    thw.ndim = 2;
    thw.shape = {static_cast<int64_t>(n), 3, 0, 0};
    thw.owner = grid;
    if (has_out) {
      return nb::make_tuple(nb::int_(total_rows),
                            ExportTensor(std::move(thw), Framework::kNumpy));
    }
    TensorView pv;
    pv.data = values.get();
    pv.dtype = DType::kFloat32;
    pv.ndim = 2;
    pv.shape = {total_rows, row, 0, 0};
    pv.owner = values;
    return nb::make_tuple(ExportTensor(std::move(pv), Framework::kNumpy),
                          ExportTensor(std::move(thw), Framework::kNumpy));
  }

 private:
  static vision::ImageProcessor Make(int patch_size, int merge_size, int temporal_patch_size,
                                     const std::vector<double>& mean,
                                     const std::vector<double>& std, double rescale_factor,
                                     int64_t min_pixels, int64_t max_pixels,
                                     const std::string& backend, const std::string& size_rule,
                                     const std::string& pillow_pass_order,
                                     int64_t max_image_pixels) {
    if (mean.size() != 3 || std.size() != 3) {
      Throw(status::InvalidArgument("image_mean and image_std need 3 values each"));
    }
    vision::ProcessorConfig c;
    c.patch_size = patch_size;
    c.merge_size = merge_size;
    c.temporal_patch_size = temporal_patch_size;
    c.image_mean = {mean[0], mean[1], mean[2]};
    c.image_std = {std[0], std[1], std[2]};
    c.rescale_factor = rescale_factor;
    c.min_pixels = min_pixels;
    c.max_pixels = max_pixels;
    c.backend = ParseBackend(backend);
    c.size_rule = ParseRule(size_rule);
    c.pillow_order = ParsePillowOrder(pillow_pass_order);
    c.max_source_pixels = max_image_pixels;
    return Unwrap(vision::ImageProcessor::Make(c));
  }

  vision::ImageProcessor processor_;
};

nb::tuple SmartResizeBinding(int64_t height, int64_t width, int64_t factor,
                             int64_t min_pixels, int64_t max_pixels,
                             const std::string& rule) {
  vision::ResizedSize s = Unwrap(
      vision::SmartResize(height, width, factor, min_pixels, max_pixels, ParseRule(rule)));
  return nb::make_tuple(s.height, s.width);
}

}  // namespace

vision::ProcessorConfig VisionConfigFromPython(nb::handle processor) {
  return CastNative<VisionProcessor>(processor, "stoker._stoker.VisionProcessor").config();
}

void RegisterVision(nb::module_& m) {
  nb::class_<VisionProcessor>(m, "VisionProcessor")
      .def(nb::init<int, int, int, std::vector<double>, std::vector<double>, double, int64_t,
                    int64_t, const std::string&, const std::string&, const std::string&, int64_t>(),
           "patch_size"_a, "merge_size"_a, "temporal_patch_size"_a, "image_mean"_a,
           "image_std"_a, "rescale_factor"_a, "min_pixels"_a, "max_pixels"_a, "backend"_a,
           "size_rule"_a, "pillow_pass_order"_a, "max_image_pixels"_a)
      .def_prop_ro("row_length", &VisionProcessor::row_length)
      .def("plan_size", &VisionProcessor::PlanSize, "height"_a, "width"_a)
      .def("plan_encoded", &VisionProcessor::PlanEncoded, "data"_a, "exif_transpose"_a)
      .def("preprocess", &VisionProcessor::Preprocess, "items"_a, "names"_a,
           "exif_transpose"_a, "alpha_to_white"_a, "out"_a = nb::none());
  m.def("smart_resize", &SmartResizeBinding, "height"_a, "width"_a, "factor"_a,
        "min_pixels"_a, "max_pixels"_a, "rule"_a);
}

}  // namespace stoker::binding
