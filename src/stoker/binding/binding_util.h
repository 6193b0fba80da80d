// Shared pieces of the Python binding: Status -> exception, Result unwrapping, and
// zero-copy export of TensorViews. Each component's binding file (module.cc for the
// loader and codec; one file per later component) includes this and registers its
// functions from a Register*(nb::module_&) call made in module.cc.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <exception>
#include <memory>
#include <span>
#include <string>

#include "stoker/core/status.h"
#include "stoker/core/tensor.h"

namespace stoker::text {
class Tokenizer;
}
namespace stoker::vision {
struct ProcessorConfig;
}
namespace stoker::pipeline {
class SampleProcessor;
}
namespace stoker::io {
class ObjectStore;
struct IoMetrics;
}

namespace stoker::binding {

namespace nb = nanobind;

// Native objects one binding file hands to another. Each throws InvalidArgument when
// the handle is not of the expected class.
std::shared_ptr<const text::Tokenizer> TokenizerFromPython(nb::handle tokenizer);  // text
vision::ProcessorConfig VisionConfigFromPython(nb::handle processor);             // vision
std::shared_ptr<const pipeline::SampleProcessor> ModelInputsFromPython(
    nb::handle model_inputs);  // model_inputs_binding.cc
std::shared_ptr<io::ObjectStore> StoreFromPython(nb::handle store);  // io_binding.cc
nb::dict IoMetricsToPython(const io::IoMetrics& metrics);          // io_binding.cc

// Carries a Status (and the sample it belongs to) from C++ to the translator.
struct StatusError : std::exception {
  Status status;
  std::string sample_key;
  StatusError(Status s, std::string key) : status(std::move(s)), sample_key(std::move(key)) {}
  const char* what() const noexcept override { return status.message().c_str(); }
};

[[noreturn]] inline void Throw(const Status& status, std::string sample_key = {}) {
  throw StatusError(status, std::move(sample_key));
}

// The C++ object behind a Python object of a bound class; InvalidArgument naming
// `what` when `handle` is of another type.
template <typename T>
T& CastNative(nb::handle handle, const char* what) {
  T* native = nullptr;
  if (!nb::try_cast(handle, native) || native == nullptr) {
    Throw(status::InvalidArgument("expected a ", what));
  }
  return *native;
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Throw(result.status());
  return std::move(result).ValueOrDie();
}

// The stoker.errors exception for `status` (not raised): what a failed item becomes
// where errors are returned in place of results.
inline nb::object ErrorObject(const Status& status, const std::string& sample_key = {}) {
  nb::object make_error = nb::module_::import_("stoker.errors").attr("_make_error");
  return make_error(std::string(StatusCodeName(status.code())), status.message(),
                    sample_key);
}

inline void TranslateStatus(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    nb::object exc = ErrorObject(e.status, e.sample_key);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  }
}

enum class Framework { kNumpy, kTorch };

inline Framework ParseFramework(const std::string& name) {
  if (name == "numpy") return Framework::kNumpy;
  if (name == "torch") return Framework::kTorch;
  Throw(status::InvalidArgument("output must be 'numpy' or 'torch', got '", name, "'"));
}

inline nb::dlpack::dtype ToDLPack(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return nb::dtype<uint8_t>();
    case DType::kInt32: return nb::dtype<int32_t>();
    case DType::kInt64: return nb::dtype<int64_t>();
    case DType::kFloat32: return nb::dtype<float>();
  }
  return nb::dtype<uint8_t>();
}

// A zero-copy view of `view` for Python; the capsule holds the owner reference.
inline nb::object ExportTensor(TensorView view, Framework framework) {
  auto* owner = new std::shared_ptr<const void>(std::move(view.owner));
  nb::capsule capsule(owner, [](void* p) noexcept {
    delete static_cast<std::shared_ptr<const void>*>(p);
  });
  size_t shape[TensorView::kMaxDims];
  for (int i = 0; i < view.ndim; ++i) shape[i] = static_cast<size_t>(view.shape[i]);
  const auto dtype = ToDLPack(view.dtype);
  if (framework == Framework::kTorch) {
    return nb::cast(nb::ndarray<nb::pytorch>(view.data, view.ndim, shape, capsule, nullptr,
                                             dtype),
                    nb::rv_policy::reference);
  }
  return nb::cast(
      nb::ndarray<nb::numpy>(view.data, view.ndim, shape, capsule, nullptr, dtype),
      nb::rv_policy::reference);
}

inline std::span<const uint8_t> BytesSpan(const nb::bytes& data) {
  return {reinterpret_cast<const uint8_t*>(data.c_str()), data.size()};
}

}  // namespace stoker::binding
