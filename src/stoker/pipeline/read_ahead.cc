#include "stoker/pipeline/read_ahead.h"

#include <chrono>
#include <utility>

#include "stoker/io/body_buffers.h"
#include "stoker/io/local_file.h"
#include "stoker/io/object_store.h"

namespace stoker::pipeline {

std::shared_ptr<ImageReads> ImageReads::Start(io::ObjectStore& store,
                                              const std::string& image_root,
                                              const std::vector<std::string>& refs,
                                              std::stop_token stop) {
  auto reads = std::make_shared<ImageReads>();
  reads->stop_ = std::move(stop);
  reads->pool_ = store.buffers();
  reads->slots_.resize(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) reads->slots_[i].ref = refs[i];
  // Every slot exists before the first read starts: a callback may run at once.
  for (size_t i = 0; i < refs.size(); ++i) {
    store.Submit(io::ResolvePath(image_root, refs[i]), {},
                 [reads, i](Status status, io::Body data, io::ObjectInfo) {
                   {
                     std::lock_guard lock(reads->mu_);
                     Slot& slot = reads->slots_[i];
                     slot.status = std::move(status);
                     slot.data = std::move(data);
                     slot.done = true;
                   }
                   reads->done_.notify_all();
                 });
  }
  return reads;
}

bool ImageReads::Take(size_t index, const std::string& ref, io::Body* out,
                      Status* status) {
  if (index >= slots_.size() || slots_[index].ref != ref) return false;
  std::unique_lock lock(mu_);
  Slot& slot = slots_[index];
  if (slot.taken) return false;  // a second attempt at the same sample reads anew
  // Short waits, so that closing the pipeline never waits for a slow read.
  while (!slot.done) {
    if (stop_.stop_requested()) {
      *status = status::Cancelled("pipeline closed");
      return true;
    }
    done_.wait_for(lock, std::chrono::milliseconds(50));
  }
  slot.taken = true;
  *status = slot.status;
  out->swap(slot.data);
  // The caller's previous buffer goes back to the store's pool for a later read.
  io::Body previous = std::move(slot.data);
  slot.data = {};
  lock.unlock();
  if (pool_ != nullptr) pool_->Give(std::move(previous));
  return true;
}

}  // namespace stoker::pipeline
