// Source: one logical dataset made of one or more JSONL files, read in file order,
// with the directory its relative image paths resolve against. Sample i of a source
// is sample (i - first[f]) of its file f. Immutable; shared by every epoch and thread.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "stoker/manifest/jsonl_file.h"

namespace stoker::manifest {

class Source {
 public:
  // Opens (and indexes) every file. Errors: those of JsonlFile::Open, each naming
  // its file; InvalidArgument for an empty file list.
  // `display_paths`: empty, or one per path (see JsonlFile::Open).
  static Result<std::shared_ptr<Source>> Open(std::string name,
                                              const std::vector<std::string>& paths,
                                              std::string image_root,
                                              const OpenOptions& options,
                                              const std::vector<std::string>& display_paths = {}) {
    if (paths.empty()) {
      return status::InvalidArgument("source '", name, "' names no manifest file");
    }
    std::shared_ptr<Source> source(new Source());
    source->name_ = std::move(name);
    source->image_root_ = std::move(image_root);
    if (!display_paths.empty() && display_paths.size() != paths.size()) {
      return status::InvalidArgument("source '", source->name_,
                                     "': one display path per manifest expected");
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      STOKER_ASSIGN_OR_RETURN(
          auto file, JsonlFile::Open(paths[i], options,
                                     display_paths.empty() ? std::string() : display_paths[i]));
      source->first_.push_back(source->num_samples_);
      source->num_samples_ += file->num_samples();
      source->files_.push_back(std::move(file));
    }
    return source;
  }

  const std::string& name() const { return name_; }
  const std::string& image_root() const { return image_root_; }
  int64_t num_samples() const { return num_samples_; }
  const std::vector<std::shared_ptr<const JsonlFile>>& files() const { return files_; }

  // Precondition: 0 <= index < num_samples().
  LineRef Sample(int64_t index) const {
    const size_t f = FileOf(index);
    return files_[f]->Sample(index - first_[f]);
  }
  std::string SampleKey(int64_t index) const {
    const size_t f = FileOf(index);
    return files_[f]->SampleKey(index - first_[f]);
  }

 private:
  Source() = default;
  size_t FileOf(int64_t index) const {
    return static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), index) -
                               first_.begin() - 1);
  }

  std::string name_;
  std::string image_root_;
  std::vector<std::shared_ptr<const JsonlFile>> files_;
  std::vector<int64_t> first_;  // first sample index of each file
  int64_t num_samples_ = 0;
};

}  // namespace stoker::manifest
