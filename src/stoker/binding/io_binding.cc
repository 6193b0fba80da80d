// Binding of the IO component: stoker.io.ObjectStore's native half. Reads release the
// GIL; read_many submits every URI at once and waits for all of them, so one Python
// call keeps the whole in-flight window busy.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stoker/binding/binding_util.h"
#include "stoker/io/body_buffers.h"
#include "stoker/io/object_store.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::binding {

namespace {

template <typename T>
void Take(nb::dict& d, const char* key, T* out) {
  if (!d.contains(key)) return;
  nb::object v = d[key];
  if (!v.is_none()) *out = nb::cast<T>(v);
  PyDict_DelItemString(d.ptr(), key);
}

io::ObjectStoreOptions ParseOptions(nb::dict d) {
  io::ObjectStoreOptions o;
  Take(d, "endpoint_url", &o.s3.endpoint_url);
  Take(d, "region", &o.s3.region);
  Take(d, "profile", &o.s3.profile);
  Take(d, "access_key_id", &o.s3.access_key_id);
  Take(d, "secret_access_key", &o.s3.secret_access_key);
  Take(d, "session_token", &o.s3.session_token);
  Take(d, "credentials_file", &o.s3.credentials_file);
  Take(d, "config_file", &o.s3.config_file);
  Take(d, "anonymous", &o.s3.anonymous);
  std::string addressing = "auto";
  Take(d, "addressing", &addressing);
  if (addressing == "path") {
    o.s3.addressing = io::Addressing::kPath;
  } else if (addressing == "virtual") {
    o.s3.addressing = io::Addressing::kVirtual;
  } else if (addressing != "auto") {
    Throw(status::InvalidArgument("addressing must be 'auto', 'path' or 'virtual', got '",
                                  addressing, "'"));
  }
  Take(d, "allowed_schemes", &o.policy.allowed_schemes);
  Take(d, "allowed_hosts", &o.policy.allowed_hosts);
  Take(d, "allow_private_addresses", &o.policy.allow_private_addresses);
  Take(d, "image_root", &o.policy.local_root);
  Take(d, "max_attempts", &o.retry.max_attempts);
  Take(d, "backoff_base", &o.retry.transient_base_s);
  Take(d, "throttle_backoff_base", &o.retry.throttle_base_s);
  Take(d, "max_backoff", &o.retry.max_backoff_s);
  Take(d, "retry_budget", &o.retry.budget_tokens);
  Take(d, "max_in_flight", &o.max_in_flight);
  Take(d, "max_bytes_in_flight", &o.max_bytes_in_flight);
  Take(d, "connect_timeout", &o.connect_timeout_s);
  Take(d, "stall_timeout", &o.stall_timeout_s);
  Take(d, "total_timeout", &o.total_timeout_s);
  Take(d, "max_object_bytes", &o.max_object_bytes);
  Take(d, "verify_tls", &o.verify_tls);
  Take(d, "ca_file", &o.ca_file);
  Take(d, "resolve", &o.resolve);
  Take(d, "seed", &o.random_seed);
  std::string client = "auto";
  Take(d, "http_client", &client);
  if (client == "curl") {
    o.http_client = io::HttpClient::kCurl;
  } else if (client != "auto") {
    Throw(status::InvalidArgument("http_client must be 'auto' or 'curl', got '", client, "'"));
  }
  if (d.size() != 0) {
    std::string names;
    for (auto [k, v] : d) names += (names.empty() ? "" : ", ") + nb::cast<std::string>(k);
    Throw(status::InvalidArgument("unknown ObjectStore option(s): ", names));
  }
  return o;
}

io::ByteRange MakeRange(int64_t offset, int64_t length) {
  return io::ByteRange{offset, length};
}

// A body handed to Python without a copy: exports its bytes through the buffer
// protocol (read-only), and gives its buffer back to the store's pool when the last
// view of it is released.
class PyBody {
 public:
  PyBody(io::Body data, std::shared_ptr<io::BodyBuffers> pool)
      : data_(std::move(data)), pool_(std::move(pool)) {}
  ~PyBody() { pool_->Give(std::move(data_)); }
  PyBody(const PyBody&) = delete;
  PyBody& operator=(const PyBody&) = delete;

  static int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
    PyBody* body = nb::inst_ptr<PyBody>(self);
    return PyBuffer_FillInfo(view, self, body->data_.data(),
                             static_cast<Py_ssize_t>(body->data_.size()), /*readonly=*/1,
                             flags);
  }

 private:
  io::Body data_;
  std::shared_ptr<io::BodyBuffers> pool_;  // not the store: a view must not keep it open
};

PyType_Slot g_body_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(&PyBody::GetBuffer)},
    {0, nullptr},
};

// The iterator behind ObjectStore.iter_read: keeps up to `window` reads submitted
// ahead of the one the caller waits for, and yields each body, in order, as a
// read-only memoryview over the received buffer. Memory: at most `window` bodies.
class PyReadStream {
 public:
  PyReadStream(std::shared_ptr<io::ObjectStore> store, std::vector<std::string> uris,
               size_t window, bool return_errors)
      : store_(std::move(store)),
        uris_(std::move(uris)),
        window_(std::max<size_t>(1, window)),
        return_errors_(return_errors),
        state_(std::make_shared<State>()) {
    state_->slots.resize(std::min(window_, uris_.size()));
  }

  nb::object Next() {
    if (next_ >= uris_.size()) throw nb::stop_iteration();
    // The wait below lets go of the GIL: a second thread must not advance the stream
    // meanwhile (a generator says the same). Checked and set under the GIL.
    if (advancing_)
      throw nb::value_error("iter_read: the stream is already being advanced");
    advancing_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{advancing_};
    Slot* slot = nullptr;
    {
      nb::gil_scoped_release release;
      // Everything up to `window` ahead of the one wanted is in flight or done.
      while (submitted_ < uris_.size() && submitted_ < next_ + window_) Submit(submitted_++);
      std::unique_lock lock(state_->mutex);
      slot = &state_->slots[next_ % state_->slots.size()];
      state_->waiting_for = next_;
      state_->cv.wait(lock, [&] { return slot->done; });
      state_->waiting_for = kNone;
    }
    // The callback wrote the slot before setting done under the mutex: it is ours now.
    Status status = std::move(slot->status);
    io::Body data = std::move(slot->data);
    slot->done = false;
    ++next_;
    if (!status.ok()) {
      if (!return_errors_) {
        next_ = uris_.size();  // a failure ends the iteration
        Throw(status);
      }
      return ErrorObject(status);
    }
    nb::object body =
        nb::cast(new PyBody(std::move(data), store_->buffers()), nb::rv_policy::take_ownership);
    PyObject* view = PyMemoryView_FromObject(body.ptr());
    if (view == nullptr) throw nb::python_error();
    return nb::steal(view);
  }

 private:
  struct Slot {
    bool done = false;
    Status status;
    io::Body data;
  };
  // Shared with the callbacks, so reads still in flight when the iterator is dropped
  // have somewhere to land.
  static constexpr size_t kNone = SIZE_MAX;
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<Slot> slots;  // a ring: uri i lands in slots[i % size]
    // The index the consumer waits for, or kNone: only its read wakes it (the reads
    // after it are taken without waiting once it is there).
    size_t waiting_for = kNone;
  };

  void Submit(size_t i) {
    // The callback must not own the store: dropping the last reference on the IO
    // thread would make the store join that thread from itself.
    store_->Submit(uris_[i], {},
                   [state = state_, i](Status st, io::Body data, io::ObjectInfo) {
                     std::lock_guard lock(state->mutex);
                     Slot& slot = state->slots[i % state->slots.size()];
                     slot.status = std::move(st);
                     slot.data = std::move(data);
                     slot.done = true;
                     if (state->waiting_for == i) state->cv.notify_all();
                   });
  }

  std::shared_ptr<io::ObjectStore> store_;
  std::vector<std::string> uris_;
  const size_t window_;
  const bool return_errors_;
  std::shared_ptr<State> state_;
  size_t next_ = 0;       // the next index to yield
  bool advancing_ = false;  // a Next is running (read and written under the GIL)
  size_t submitted_ = 0;  // indexes below this are submitted
};

class PyObjectStore {
 public:
  explicit PyObjectStore(nb::dict options) {
    io::ObjectStoreOptions parsed = ParseOptions(std::move(options));
    Result<std::shared_ptr<io::ObjectStore>> store = status::Internal("unreachable");
    {
      nb::gil_scoped_release release;
      store = io::ObjectStore::Make(std::move(parsed));
    }
    store_ = Unwrap(std::move(store));
  }

  nb::bytes Read(const std::string& uri, int64_t offset, int64_t length) {
    io::Body out;
    Status st;
    {
      nb::gil_scoped_release release;
      st = store_->Read(uri, MakeRange(offset, length), &out);
    }
    if (!st.ok()) Throw(st);
    nb::bytes bytes(reinterpret_cast<const char*>(out.data()), out.size());
    store_->Recycle(std::move(out));
    return bytes;
  }

  // (bytes, object size or -1, etag) of a range: what staging a manifest needs.
  nb::tuple ReadWithInfo(const std::string& uri, int64_t offset, int64_t length) {
    io::Body out;
    io::ObjectInfo info;
    Status st;
    {
      nb::gil_scoped_release release;
      st = store_->Read(uri, MakeRange(offset, length), &out, &info);
    }
    if (!st.ok()) Throw(st);
    nb::bytes bytes(reinterpret_cast<const char*>(out.data()), out.size());
    store_->Recycle(std::move(out));
    return nb::make_tuple(bytes, info.size, info.etag);
  }

  // Every result in order; a failed read is an exception object in its place when
  // `return_errors`, else the first failure (in order) is raised.
  // Every read is submitted at once; each finished object becomes a bytes object as soon
  // as it arrives (the GIL taken per wave of completions), so converting overlaps the
  // reads still in flight and each body's buffer is freed right after its copy.
  nb::list ReadMany(const std::vector<std::string>& uris, bool return_errors) {
    struct Slot {
      Status status;
      io::Body data;
    };
    const size_t n = uris.size();
    std::vector<Slot> slots(n);
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<size_t> finished;  // indexes whose slot is final, guarded by mutex
    size_t callbacks_run = 0;      // guarded by mutex
    {
      nb::gil_scoped_release release;
      for (size_t i = 0; i < n; ++i) {
        store_->Submit(uris[i], {}, [&, i](Status st, io::Body data, io::ObjectInfo) {
          std::lock_guard lock(mutex);
          slots[i].status = std::move(st);
          slots[i].data = std::move(data);
          finished.push_back(i);
          ++callbacks_run;
          cv.notify_one();
        });
      }
    }
    // The callbacks write into this frame: whatever happens below (a MemoryError), no
    // return before every one has run.
    struct WaitForCallbacks {
      std::mutex& mutex;
      std::condition_variable& cv;
      size_t& run;
      size_t total;
      ~WaitForCallbacks() {
        nb::gil_scoped_release release;
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return run == total; });
      }
    } wait_for_callbacks{mutex, cv, callbacks_run, n};
    nb::list out;
    for (size_t i = 0; i < n; ++i) out.append(nb::none());
    size_t first_failed = n;
    std::vector<size_t> ready;
    for (size_t converted = 0; converted < n;) {
      {
        nb::gil_scoped_release release;
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return !finished.empty(); });
        ready.swap(finished);
      }
      // A slot in `ready` is no longer written by its callback.
      for (size_t i : ready) {
        Slot& slot = slots[i];
        if (slot.status.ok()) {
          out[i] = nb::bytes(reinterpret_cast<const char*>(slot.data.data()), slot.data.size());
        } else if (return_errors) {
          out[i] = ErrorObject(slot.status);
        } else {
          first_failed = std::min(first_failed, i);
        }
        store_->Recycle(std::move(slot.data));
        ++converted;
      }
      ready.clear();
    }
    if (first_failed < n) Throw(slots[first_failed].status);  // the first in order
    return out;
  }

  PyReadStream* IterRead(std::vector<std::string> uris, int64_t window, bool return_errors) {
    const size_t w = window > 0 ? static_cast<size_t>(window)
                                : 2 * static_cast<size_t>(store_->max_in_flight());
    return new PyReadStream(store_, std::move(uris), w, return_errors);
  }

  nb::dict Stats() const { return IoMetricsToPython(store_->Metrics()); }

  const std::shared_ptr<io::ObjectStore>& store() const { return store_; }

  std::string Repr() const { return store_->ToString(); }

 private:
  std::shared_ptr<io::ObjectStore> store_;
};

}  // namespace

nb::dict IoMetricsToPython(const io::IoMetrics& m) {
  nb::dict d;
  d["reads_ok"] = m.reads_ok;
  d["reads_failed"] = m.reads_failed;
  d["requests"] = m.requests;
  d["bytes"] = m.bytes;
  d["retries"] = m.retries;
  d["resumed"] = m.resumed;
  d["budget_exhausted"] = m.budget_exhausted;
  d["in_flight"] = m.in_flight;
  d["peak_in_flight"] = m.peak_in_flight;
  d["connections"] = m.connections;
  d["bytes_in_flight"] = m.bytes_in_flight;
  nb::dict by_reason, errors;
  for (const auto& [k, v] : m.retries_by_reason) by_reason[k.c_str()] = v;
  for (const auto& [k, v] : m.errors_by_reason) errors[k.c_str()] = v;
  d["retries_by_reason"] = by_reason;
  d["errors_by_reason"] = errors;
  nb::list bounds;
  for (double b : io::IoMetrics::kLatencyBoundsMs) bounds.append(b);
  d["latency_bounds_ms"] = bounds;
  nb::list ttfb, total;
  for (uint64_t c : m.ttfb_ms) ttfb.append(c);
  for (uint64_t c : m.total_ms) total.append(c);
  d["ttfb_ms_histogram"] = ttfb;
  d["total_ms_histogram"] = total;
  return d;
}

std::shared_ptr<io::ObjectStore> StoreFromPython(nb::handle store) {
  return CastNative<PyObjectStore>(store, "stoker.io.ObjectStore").store();
}

void RegisterIO(nb::module_& m) {
  nb::class_<PyBody>(m, "_Body", nb::type_slots(g_body_slots));
  nb::class_<PyReadStream>(m, "_ReadStream")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &PyReadStream::Next);
  nb::class_<PyObjectStore>(m, "_ObjectStore")
      .def(nb::init<nb::dict>(), "options"_a)
      .def("read", &PyObjectStore::Read, "uri"_a, "offset"_a = 0, "length"_a = -1)
      .def("read_many", &PyObjectStore::ReadMany, "uris"_a, "return_errors"_a = false)
      .def("read_with_info", &PyObjectStore::ReadWithInfo, "uri"_a, "offset"_a, "length"_a)
      .def("iter_read", &PyObjectStore::IterRead, "uris"_a, "window"_a, "return_errors"_a)
      .def("stats", &PyObjectStore::Stats)
      .def("__repr__", &PyObjectStore::Repr);
}

}  // namespace stoker::binding
