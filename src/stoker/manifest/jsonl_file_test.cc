#include "stoker/manifest/jsonl_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "test_images.h"

namespace stoker::manifest {
namespace {

using stoker::testing::TempDir;
using stoker::testing::WriteFile;

TEST(JsonlFileTest, IndexesSampleLinesWithTheirLineNumbers) {
  TempDir dir;
  const auto path = dir.path() / "m.jsonl";
  WriteFile(path, std::string("{\"a\":1}\n\n   \n{\"b\":2}\r\n{\"c\":3}"));
  auto file = JsonlFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ((*file)->num_samples(), 3);
  EXPECT_EQ((*file)->Sample(0).text, "{\"a\":1}");
  EXPECT_EQ((*file)->Sample(0).line_number, 1);
  EXPECT_EQ((*file)->Sample(1).text, "{\"b\":2}");  // CR stripped
  EXPECT_EQ((*file)->Sample(1).line_number, 4);
  EXPECT_EQ((*file)->Sample(2).text, "{\"c\":3}");  // no trailing newline
  EXPECT_EQ((*file)->Sample(2).line_number, 5);
  EXPECT_EQ((*file)->SampleKey(1), path.string() + ":4");
}

TEST(JsonlFileTest, MissingFileIsNotFound) {
  auto file = JsonlFile::Open("/nonexistent/dir/m.jsonl");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/m.jsonl"), std::string::npos);
}

TEST(JsonlFileTest, EmptyOrBlankFileIsAManifestError) {
  TempDir dir;
  WriteFile(dir.path() / "empty.jsonl", std::string());
  WriteFile(dir.path() / "blank.jsonl", std::string("\n \n\t\n"));
  for (const char* name : {"empty.jsonl", "blank.jsonl"}) {
    auto file = JsonlFile::Open((dir.path() / name).string());
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kManifestError);
    EXPECT_NE(file.status().message().find("holds no sample"), std::string::npos);
  }
}

TEST(JsonlFileTest, DirectoryIsAnIOError) {
  TempDir dir;
  auto file = JsonlFile::Open(dir.path().string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace stoker::manifest

namespace stoker::manifest {
namespace {

using stoker::testing::TempDir;
using stoker::testing::WriteFile;

std::vector<std::string> AllLines(const JsonlFile& file) {
  std::vector<std::string> lines;
  for (int64_t i = 0; i < file.num_samples(); ++i) {
    lines.push_back(std::to_string(file.Sample(i).line_number) + "=" +
                    std::string(file.Sample(i).text));
  }
  return lines;
}

TEST(LineIndexCacheTest, BuiltOnceThenMappedFromTheCache) {
  TempDir dir;
  const auto path = (dir.path() / "m.jsonl").string();
  WriteFile(path, std::string("{\"a\":1}\n\n{\"b\":2}\n{\"c\":3}\n"));
  OpenOptions options{(dir.path() / "cache").string()};
  auto first = *JsonlFile::Open(path, options);
  EXPECT_FALSE(first->index_from_cache());
  auto second = *JsonlFile::Open(path, options);
  EXPECT_TRUE(second->index_from_cache());
  EXPECT_EQ(AllLines(*first), AllLines(*second));
  EXPECT_EQ(AllLines(*second),
            (std::vector<std::string>{"1={\"a\":1}", "3={\"b\":2}", "4={\"c\":3}"}));
}

TEST(LineIndexCacheTest, ChangedManifestIsReindexed) {
  TempDir dir;
  const auto path = (dir.path() / "m.jsonl").string();
  OpenOptions options{(dir.path() / "cache").string()};
  WriteFile(path, std::string("{\"a\":1}\n{\"b\":2}\n"));
  ASSERT_EQ((*JsonlFile::Open(path, options))->num_samples(), 2);
  WriteFile(path, std::string("{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"));  // size changes
  auto reopened = *JsonlFile::Open(path, options);
  EXPECT_FALSE(reopened->index_from_cache());
  EXPECT_EQ(reopened->num_samples(), 3);
}

TEST(LineIndexCacheTest, DamagedCacheFileIsIgnoredAndReplaced) {
  TempDir dir;
  const auto path = (dir.path() / "m.jsonl").string();
  const auto cache_dir = (dir.path() / "cache").string();
  WriteFile(path, std::string("{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"));
  ASSERT_TRUE(JsonlFile::Open(path, {cache_dir}).ok());
  const std::string cache_file = LineIndex::CachePath(cache_dir, path);
  for (size_t flip : {size_t{3}, size_t{70}}) {  // in the header; in the payload
    std::string bytes;
    {
      std::ifstream in(cache_file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    ASSERT_GT(bytes.size(), flip);
    bytes[flip] ^= 0x5A;
    WriteFile(cache_file, bytes);
    auto file = *JsonlFile::Open(path, {cache_dir});
    EXPECT_FALSE(file->index_from_cache()) << "flip at " << flip;
    EXPECT_EQ(file->num_samples(), 3);
    EXPECT_TRUE((*JsonlFile::Open(path, {cache_dir}))->index_from_cache()) << "rewritten";
  }
  WriteFile(cache_file, std::string("short"));  // truncated
  EXPECT_FALSE((*JsonlFile::Open(path, {cache_dir}))->index_from_cache());
}

}  // namespace
}  // namespace stoker::manifest
