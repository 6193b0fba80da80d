#include "stoker/pipeline/read_ahead.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stoker/io/object_store.h"

namespace stoker::pipeline {
namespace {

io::EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

class ImageReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (std::filesystem::temp_directory_path() /
             ("stoker_read_ahead_" + std::to_string(::getpid())))
                .string();
    std::filesystem::create_directories(root_ + "/img");
    std::ofstream(root_ + "/img/a.jpg") << "AAAA";
    std::ofstream(root_ + "/img/b.jpg") << "BB";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::shared_ptr<io::ObjectStore> Store(io::ObjectStoreOptions options = {}) {
    options.policy.local_root = root_;
    auto store = io::ObjectStore::Make(options, NoEnv());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return *store;
  }

  std::string root_;
};

TEST_F(ImageReadsTest, TakesEachImageOnceUnderItsReference) {
  auto store = Store();
  std::stop_source stop;
  auto reads = ImageReads::Start(*store, root_, {"img/a.jpg", "img/b.jpg", "img/none.jpg"},
                                 stop.get_token());
  ASSERT_EQ(reads->size(), 3u);
  io::Body out;
  Status status;
  // Another reference at that position (a substitute sample): not read ahead.
  EXPECT_FALSE(reads->Take(0, "img/b.jpg", &out, &status));
  EXPECT_FALSE(reads->Take(7, "img/a.jpg", &out, &status));
  ASSERT_TRUE(reads->Take(1, "img/b.jpg", &out, &status));
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(std::string(out.begin(), out.end()), "BB");
  ASSERT_TRUE(reads->Take(0, "img/a.jpg", &out, &status));
  EXPECT_EQ(std::string(out.begin(), out.end()), "AAAA");
  // Taken already: a second attempt reads for itself.
  EXPECT_FALSE(reads->Take(0, "img/a.jpg", &out, &status));
  // A failed read is handed over as its status.
  ASSERT_TRUE(reads->Take(2, "img/none.jpg", &out, &status));
  EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.ToString();
}

TEST_F(ImageReadsTest, StopEndsTheWaitForAReadThatHangs) {
  // A loopback port that accepts connections (the kernel does) but never answers.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/slow.jpg";

  io::ObjectStoreOptions options;
  options.policy.allow_private_addresses = true;
  options.stall_timeout_s = 60;
  options.total_timeout_s = 60;
  options.retry.max_attempts = 1;
  auto store = Store(options);
  std::stop_source stop;
  auto reads = ImageReads::Start(*store, root_, {url}, stop.get_token());
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.request_stop();
  });
  io::Body out;
  Status status;
  ASSERT_TRUE(reads->Take(0, url, &out, &status));
  closer.join();
  EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.ToString();
  ::close(fd);
}

}  // namespace
}  // namespace stoker::pipeline
